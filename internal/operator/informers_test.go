package operator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// The model fed by the informers is synced only once every informer has
// handed over its initial list and every NodeClaim and Node in the cache
// has reached the model.
func TestFeedSyncsTheModelOnlyWhenComplete(t *testing.T) {
	ctx := context.Background()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim, node).Build()
	claims, nodes := controllertest.NewFakeInformer(), controllertest.NewFakeInformer(controllertest.Synced)
	informers := &informertest.FakeInformers{Scheme: scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		karpv1.SchemeGroupVersion.WithKind("NodeClaim"): claims,
		corev1.SchemeGroupVersion.WithKind("Node"):      nodes,
	}}
	cluster := state.NewCluster(clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	if err := feed(ctx, informers, api, cluster, func() {}); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"the NodeClaim informer is still listing", func() {}, false},
		{"listed, but its handler has not delivered web-1", claims.Synced, false},
		{"the NodeClaim delivered, the Node not yet", func() { claims.Add(claim) }, false},
		{"everything delivered", func() { nodes.Add(node) }, true},
	}
	for _, s := range steps {
		s.do()
		if got := cluster.Synced(); got != s.want {
			t.Fatalf("%s: synced %v, want %v", s.name, got, s.want)
		}
	}
	// A NodeClaim created since, in the cache but not yet handed to the
	// model: the model is behind again.
	late := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}}
	if err := api.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	if cluster.Synced() {
		t.Error("synced while a NodeClaim in the cache has not reached the model")
	}
	claims.Add(late)
	if !cluster.Synced() {
		t.Error("not synced once the late NodeClaim arrived")
	}
}

// `nodewright explain` fills the model with one list per kind: after that
// the model is complete.
func TestSyncMarksTheModelSynced(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}).Build()
	cluster := state.NewCluster(clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	if err := Sync(context.Background(), client.Reader(api), scheme, cluster); err != nil {
		t.Fatal(err)
	}
	if !cluster.Synced() || len(cluster.Inventory().Nodes) != 1 {
		t.Errorf("after Sync: synced %v, %d nodes", cluster.Synced(), len(cluster.Inventory().Nodes))
	}
}
