package nodeclaim

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
)

// writes counts the writes a controller makes, by kind of write.
type writes map[string]int

func (w writes) total() int {
	n := 0
	for _, v := range w {
		n += v
	}
	return n
}

// counting counts every write; onStatusPatch and onPatch, when set, run
// before a status patch or a patch goes through (another actor's write
// landing just then).
func counting(w writes, onStatusPatch, onPatch func(ctx context.Context, c client.Client, obj client.Object)) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w["create"]++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w["update"]++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w["patch"]++
			if onPatch != nil {
				onPatch(ctx, c, obj)
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w["delete"]++
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w["update "+sub]++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w["patch "+sub]++
			if onStatusPatch != nil {
				onStatusPatch(ctx, c, obj)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

// A reconcile that finds the claim as it leaves it writes nothing: not
// while it waits for the node to become ready, not once it is.
func TestNoWriteWhenNothingChanged(t *testing.T) {
	ctx := context.Background()
	w := writes{}
	e := newEnv(t, counting(w, nil, nil))
	e.create(t, "web-abc")
	e.reconcile(t, "web-abc")
	clear(w)
	e.clock.Step(5e9)
	if e.reconcile(t, "web-abc"); w.total() != 0 {
		t.Errorf("waiting for the node: writes %v, want none", w)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = nil
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if nc, _ := e.reconcile(t, "web-abc"); condition(nc, "Ready") != "True/Ready" {
		t.Fatalf("ready %s", condition(nc, "Ready"))
	}
	clear(w)
	if e.reconcile(t, "web-abc"); w.total() != 0 {
		t.Errorf("ready: writes %v, want none", w)
	}
}

// The disruption loop marks the claim while the lifecycle registers it:
// the lifecycle's status write conflicts, is made again on the fresh
// claim within the same reconcile, and the loop's condition survives; the
// node is counted once.
func TestConcurrentConditionSurvivesTheLifecycleWrite(t *testing.T) {
	w := writes{}
	marked := false
	e := newEnv(t, counting(w, func(ctx context.Context, c client.Client, obj client.Object) {
		if _, ok := obj.(*karpv1.NodeClaim); !ok || marked {
			return
		}
		marked = true
		nc := &karpv1.NodeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), nc); err != nil {
			panic(err)
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
			Reason: "Drifted", LastTransitionTime: metav1.NewTime(epoch)})
		if err := c.Status().Update(ctx, nc); err != nil {
			panic(err)
		}
	}, nil))
	e.create(t, "web-abc")
	nc, res := e.reconcile(t, "web-abc")
	if condition(nc, "Registered") != "True/Registered" || condition(nc, "DisruptionReason") != "True/Drifted" {
		t.Errorf("registered %s, disruption reason %s: want both", condition(nc, "Registered"), condition(nc, "DisruptionReason"))
	}
	if w["patch status"] != 2 || res.RequeueAfter == 0 {
		t.Errorf("%d status patches, requeue %v; want 2 (one conflicting) and the liveness requeue", w["patch status"], res.RequeueAfter)
	}
	if n := counterSum(t, e.metrics, "karpenter_nodes_created_total"); n != 1 {
		t.Errorf("karpenter_nodes_created_total = %v, want 1", n)
	}
}

// A taint another controller puts on the node while registration syncs it
// survives the sync: the node patch carries the taints list, so it is
// locked, conflicts, and syncs the fresh node.
func TestConcurrentTaintSurvivesRegistration(t *testing.T) {
	ctx := context.Background()
	w := writes{}
	tainted := false
	e := newEnv(t, counting(w, nil, func(ctx context.Context, c client.Client, obj client.Object) {
		if _, ok := obj.(*corev1.Node); !ok || tainted {
			return
		}
		tainted = true
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), node); err != nil {
			panic(err)
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
		if err := c.Update(ctx, node); err != nil {
			panic(err)
		}
	}))
	e.create(t, "web-abc")
	nc, _ := e.reconcile(t, "web-abc")
	if condition(nc, "Registered") != "True/Registered" {
		t.Fatalf("registered %s", condition(nc, "Registered"))
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, taint := range node.Spec.Taints {
		keys[taint.Key] = true
	}
	if !tainted || !keys["example.com/maintenance"] || !keys["dedicated"] || keys[karpv1.TaintKeyUnregistered] {
		t.Errorf("taints %v: want the other controller's and the claim's, without the unregistered taint", node.Spec.Taints)
	}
}

// A pass, just after a restart, that starts from a stale copy of the claim
// (the cache still holds it launched but not yet registered) conflicts,
// reads the claim again through the API reader, writes only what is still
// missing, and does not count the node again: the process before the
// restart counted it.
func TestStaleCopyDoesNotCountTheNodeTwice(t *testing.T) {
	ctx := context.Background()
	var stale *karpv1.NodeClaim
	e := newEnv(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if nc, ok := obj.(*karpv1.NodeClaim); ok && stale != nil {
				stale.DeepCopyInto(nc)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	e.create(t, "web-abc")
	nc, _ := e.reconcile(t, "web-abc")
	if nc.Status.NodeName != "web-abc" {
		t.Fatalf("not registered: %+v", nc.Status)
	}
	stale = nc.DeepCopy()
	stale.Spec.StartupTaints = nil // registering again would put it back
	stale.Status.NodeName = ""
	meta.RemoveStatusCondition(&stale.Status.Conditions, karpv1.ConditionTypeRegistered)
	meta.RemoveStatusCondition(&stale.Status.Conditions, karpv1.ConditionTypeInitialized)
	// Another actor writes the claim: the stale copy is now behind.
	fresh := nc.DeepCopy()
	fresh.Labels["example.com/team"] = "web"
	if err := e.kube.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = nil
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	restarted := New(e.kube, e.provider, e.clock, e.unavailable, record.NewFakeRecorder(100), m)
	restarted.WithAPIReader(readerFunc(func(ctx context.Context, key client.ObjectKey, obj client.Object) error {
		// The API server itself, behind the interceptor's stale cache.
		saved := stale
		stale = nil
		defer func() { stale = saved }()
		return e.kube.Get(ctx, key, obj)
	}))
	if _, err := restarted.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-abc"}}); err != nil {
		t.Fatal(err)
	}
	stale = nil
	nc = &karpv1.NodeClaim{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, nc); err != nil {
		t.Fatal(err)
	}
	if condition(nc, "Initialized") != "True/Initialized" || nc.Status.NodeName != "web-abc" || nc.Labels["example.com/team"] != "web" {
		t.Errorf("initialized %s, node %q, labels %v", condition(nc, "Initialized"), nc.Status.NodeName, nc.Labels)
	}
	if n := counterSum(t, reg, "karpenter_nodes_created_total"); n != 0 {
		t.Errorf("karpenter_nodes_created_total after the restart = %v, want 0", n)
	}
}

// readerFunc is a client.Reader that reads objects through get.
type readerFunc func(ctx context.Context, key client.ObjectKey, obj client.Object) error

func (f readerFunc) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return f(ctx, key, obj)
}

func (f readerFunc) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not served")
}
