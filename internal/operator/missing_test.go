package operator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// A NodeClaim (or Node) the model holds but the API no longer has, its
// delete event never delivered (created and deleted across a watch
// relist), is forgotten once missing for the grace: its pods are not held
// nominated to it, nor its pool charged for it, forever. One missing only
// briefly (recorded on create, not in the cache yet) is kept.
func TestTheFeedForgetsNodeClaimsTheAPINoLongerHas(t *testing.T) {
	ctx := context.Background()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).Build()
	claims, nodes := controllertest.NewFakeInformer(controllertest.Synced), controllertest.NewFakeInformer(controllertest.Synced)
	informers := &informertest.FakeInformers{Scheme: scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		karpv1.SchemeGroupVersion.WithKind("NodeClaim"): claims,
		corev1.SchemeGroupVersion.WithKind("Node"):      nodes,
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	cluster := state.NewCluster(clk)
	triggered := 0
	if err := feed(ctx, informers, api, cluster, func() { triggered++ }); err != nil {
		t.Fatal(err)
	}
	// The handler delivered web-1 and its node; the API lost both, and the
	// delete events never came.
	ghost := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{karpv1.LabelNodePool: "web"}}}
	claims.Add(ghost)
	nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1-node"}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: types.UID("a")}}
	cluster.UpdatePod(pod)
	cluster.Nominate([]*corev1.Pod{pod}, ghost.Name, time.Hour)

	holds := func() (claim, node bool) { return modelHolds(cluster, "web-1", "web-1-node") }
	cluster.Synced()
	clk.Step(missingGrace / 2)
	cluster.Synced()
	if claim, node := holds(); !claim || !node {
		t.Fatalf("forgotten after %v (claim kept %v, node kept %v): too soon, a NodeClaim just created may not be in the cache yet", missingGrace/2, claim, node)
	}
	clk.Step(missingGrace)
	cluster.Synced()
	if claim, node := holds(); claim || node {
		t.Errorf("still held %v after it left the API (claim %v, node %v)", missingGrace*3/2, claim, node)
	}
	if got := cluster.NominationOf("default", "a"); got != "" {
		t.Errorf("pod a still nominated to %q", got)
	}
	if triggered == 0 {
		t.Error("no provisioning batch triggered for the forgotten NodeClaim's pods")
	}
}

// A NodeClaim briefly missing and back (or recorded before the cache had
// it) starts its grace again when it goes missing again.
func TestTheFeedKeepsANodeClaimThatCameBack(t *testing.T) {
	ctx := context.Background()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).Build()
	claims, nodes := controllertest.NewFakeInformer(controllertest.Synced), controllertest.NewFakeInformer(controllertest.Synced)
	informers := &informertest.FakeInformers{Scheme: scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		karpv1.SchemeGroupVersion.WithKind("NodeClaim"): claims,
		corev1.SchemeGroupVersion.WithKind("Node"):      nodes,
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	cluster := state.NewCluster(clk)
	if err := feed(ctx, informers, api, cluster, func() {}); err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{karpv1.LabelNodePool: "web"}}}
	cluster.UpdateNodeClaim(nc) // the provisioner records it on create
	cluster.Synced()
	clk.Step(missingGrace - time.Second)
	if err := api.Create(ctx, nc.DeepCopy()); err != nil { // the cache has it now
		t.Fatal(err)
	}
	cluster.Synced()
	if err := api.Delete(ctx, nc.DeepCopy()); err != nil { // gone again, its event on its way
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	cluster.Synced()
	if claim, _ := modelHolds(cluster, "web-1", ""); !claim {
		t.Error("forgotten 2s after it went missing again: the grace did not start over")
	}
}

// modelHolds reports whether the model's snapshot has the NodeClaim (not
// launched yet) and the Node.
func modelHolds(cluster *state.Cluster, claim, node string) (hasClaim, hasNode bool) {
	snap := cluster.Snapshot()
	for _, ncs := range snap.Launching {
		for _, nc := range ncs {
			hasClaim = hasClaim || nc.Name == claim
		}
	}
	for _, n := range snap.Nodes {
		hasNode = hasNode || n.Name == node
	}
	return hasClaim, hasNode
}
