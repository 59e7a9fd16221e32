package provisioning

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Until the cluster model has synced, no decision is made: a NodeClaim the
// informers have not delivered yet could already hold these pods, so a
// decision now could buy them a second node.
func TestNothingIsDecidedBeforeTheModelSyncs(t *testing.T) {
	cases := []struct {
		name   string
		decide func(context.Context, env) ([]*karpv1.NodeClaim, error)
	}{
		{"a provisioning round", func(ctx context.Context, e env) ([]*karpv1.NodeClaim, error) {
			return e.provisioner.Provision(ctx)
		}},
		{"an interrupted node's pods", func(ctx context.Context, e env) ([]*karpv1.NodeClaim, error) {
			moving := pendingPod("moving", "1")
			moving.Spec.NodeName = "interrupted"
			return e.provisioner.ProvisionFor(ctx, "interrupted", []*corev1.Pod{moving})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newUnsyncedEnv(t, kwokPool("web"))
			e.cluster.UpdatePod(pendingPod("a", "1"))

			created, _ := tc.decide(ctx, e)
			list := &karpv1.NodeClaimList{}
			if err := e.kube.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			if len(created) != 0 || len(list.Items) != 0 {
				t.Fatalf("an unsynced model bought %d NodeClaims (%d in the API)", len(created), len(list.Items))
			}
		})
	}
}

// The gate says why it held (the interruption controller retries on it),
// and opens once the feed says the model is complete.
func TestTheGateOpensOnceSynced(t *testing.T) {
	ctx := context.Background()
	e := newUnsyncedEnv(t, kwokPool("web"))
	e.cluster.UpdatePod(pendingPod("a", "1"))
	if _, err := e.provisioner.Provision(ctx); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Provision on an unsynced model: %v, want ErrNotSynced", err)
	}
	if _, err := e.provisioner.Plan(ctx); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Plan on an unsynced model: %v, want ErrNotSynced", err)
	}
	e.cluster.MarkSynced()
	if created, err := e.provisioner.Provision(ctx); err != nil || len(created) != 1 {
		t.Fatalf("once synced: %d NodeClaims, %v; want 1", len(created), err)
	}
}
