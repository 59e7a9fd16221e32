package kwok_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/kwok"
)

// Create is idempotent per NodeClaim: again, from a fresh provider (a
// restart), it returns the Node made the first time. A Node of the same
// name that is going away, or that registered for another NodeClaim of
// that name, is not taken for this NodeClaim's.
func TestCreateIsIdempotentPerNodeClaim(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.nodeClaim("web-1")
	nc.UID = "uid-1"
	first, err := e.provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := kwok.New(e.kube, smallCatalog(t)).Create(ctx, nc)
	if err != nil || again.Status.ProviderID != first.Status.ProviderID || again.Labels[corev1.LabelInstanceTypeStable] != first.Labels[corev1.LabelInstanceTypeStable] {
		t.Errorf("Create again: %v, %v; want %s", again, err, first.Status.ProviderID)
	}
	nodes := &corev1.NodeList{}
	if err := e.kube.List(ctx, nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("%d nodes (%v), want 1", len(nodes.Items), err)
	}

	node := &nodes.Items[0]
	node.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: "web-1", UID: "uid-0"}}
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := e.provider.Create(ctx, nc); err == nil || !strings.Contains(err.Error(), "another nodeclaim") {
		t.Errorf("Create next to another NodeClaim's node of the same name: %v, want it refused", err)
	}

	node.OwnerReferences = nil
	node.Finalizers = []string{karpv1.TerminationFinalizer}
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := e.provider.Create(ctx, nc); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("Create next to a node of the same name being deleted: %v, want it refused", err)
	}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil || node.DeletionTimestamp == nil {
		t.Errorf("the deleting node: %v, %v", node.DeletionTimestamp, err)
	}
}

// A NodeClaim named like an earlier one (another UID) whose Node has not
// registered yet (no owner reference) does not take that Node: the Node
// records the UID it was made for.
func TestCreateDoesNotAdoptTheUnregisteredNodeOfAnEarlierSameNamedNodeClaim(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	zone := func(z string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}}
	}
	old := e.nodeClaim("web-1", zone("zone-a"))
	old.UID = "uid-1"
	if _, err := e.provider.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	nc := e.nodeClaim("web-1", zone("zone-b"))
	nc.UID = "uid-2"
	got, err := e.provider.Create(ctx, nc)
	if err == nil {
		t.Fatalf("NodeClaim uid-2 requiring zone-b got %s in %q (uid-1's node)", got.Status.ProviderID, got.Labels[corev1.LabelTopologyZone])
	}
	if !strings.Contains(err.Error(), "web-1") || !strings.Contains(err.Error(), "uid-1") {
		t.Errorf("error %q: want it to name the nodeclaim and the node's owner uid", err)
	}
	// The NodeClaim it was made for still adopts it (a restart).
	if again, err := kwok.New(e.kube, smallCatalog(t)).Create(ctx, old); err != nil || again.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("Create again for uid-1: %v, %v; want its zone-a node", again, err)
	}
}
