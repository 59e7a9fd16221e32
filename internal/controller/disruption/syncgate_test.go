package disruption

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// A model that has not synced (a controller just started, its informers
// still listing) decides nothing: not even a drifted node, which is
// otherwise disrupted in the first pass, is touched until it has.
func TestLoopWaitsForTheModelToSync(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	nc := e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	unsynced := state.NewCluster(e.clock)
	unsynced.UpdateNodePool(np)
	unsynced.UpdateNodeClaim(e.claim(t))
	unsynced.UpdateNode(node)
	l := NewLoop(e.kube, unsynced, e.clock, record.NewFakeRecorder(10), nil, logr.Discard(), nil, Options{})

	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if e.claim(t).DeletionTimestamp != nil {
		t.Fatal("a node was disrupted on a model that had not synced")
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil || len(node.Spec.Taints) != 0 {
		t.Fatalf("node taints %v (%v): want none before the model syncs", node.Spec.Taints, err)
	}

	unsynced.MarkSynced()
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if e.claim(t).DeletionTimestamp == nil {
		t.Error("the drifted node was not disrupted once the model synced")
	}
}
