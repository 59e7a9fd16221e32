package termination

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// otherTaint is what another actor (an operator, a node-problem detector)
// puts on the node while the controller works on it.
var otherTaint = corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}

// raceOnPatch returns interceptor functions under which another actor
// changes the node right before the controller's nth patch of it (from 1)
// reaches the API server: the controller read the node before the other
// actor wrote it.
func raceOnPatch(t *testing.T, node string, nth int, change func(*corev1.Node)) interceptor.Funcs {
	patches := 0
	return interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*corev1.Node); ok && obj.GetName() == node {
			if patches++; patches == nth {
				current := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKey{Name: node}, current); err != nil {
					t.Fatal(err)
				}
				change(current)
				if err := c.Update(ctx, current); err != nil {
					t.Fatal(err)
				}
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
}

func terminationScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// deletingNode is a Ready managed node being deleted.
func deletingNode(now metav1.Time) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", DeletionTimestamp: &now, Finalizers: []string{karpv1.TerminationFinalizer}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// A deleting node is tainted disrupted while another actor adds a taint of
// its own: both taints stay (the controller's write must not replace the
// list it read with a stale copy).
func TestCordonKeepsAConcurrentTaint(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	// A do-not-disrupt pod keeps the node draining, so it stays to be read.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: "default", Annotations: map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	base := fake.NewClientBuilder().WithScheme(terminationScheme(t)).WithObjects(deletingNode(now), pod).
		WithIndex(&corev1.Pod{}, PodNodeNameIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	kube := interceptor.NewClient(base, raceOnPatch(t, "n1", 1, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, otherTaint) }))
	c := New(kube, nil, clocktesting.NewFakeClock(now.Time), record.NewFakeRecorder(10), nil)
	if _, err := c.reconcileNode(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Node{}
	if err := base.Get(context.Background(), client.ObjectKey{Name: "n1"}, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []corev1.Taint{karpv1.DisruptedNoScheduleTaint, otherTaint} {
		if !slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&want) }) {
			t.Errorf("node taints %v: %s is missing", got.Spec.Taints, want.Key)
		}
	}
	if got.Labels[labelExcludeFromLB] != "karpenter" {
		t.Errorf("node labels %v: want it excluded from load balancers", got.Labels)
	}
}

// Releasing a drained node removes only Nodewright's finalizer: one that
// another actor adds meanwhile stays, and the node with it.
func TestReleaseKeepsAConcurrentFinalizer(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	base := fake.NewClientBuilder().WithScheme(terminationScheme(t)).WithObjects(deletingNode(now)).
		WithIndex(&corev1.Pod{}, PodNodeNameIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	// Patch 1 cordons; patch 2 releases.
	kube := interceptor.NewClient(base, raceOnPatch(t, "n1", 2, func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, "example.com/protect") }))
	c := New(kube, nil, clocktesting.NewFakeClock(now.Time), record.NewFakeRecorder(10), nil)
	if _, err := c.reconcileNode(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Node{}
	if err := base.Get(context.Background(), client.ObjectKey{Name: "n1"}, got); err != nil {
		t.Fatalf("the node is gone (%v): the other actor's finalizer was dropped", err)
	}
	if !slices.Equal(got.Finalizers, []string{"example.com/protect"}) {
		t.Errorf("finalizers %v, want only the other actor's", got.Finalizers)
	}
}
