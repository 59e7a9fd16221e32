package nodepool

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

type statusEnv struct {
	api        client.Client // the API, without the interceptor
	clock      *clocktesting.FakeClock
	controller *Controller
	// writes counts NodePool status writes.
	writes *int
}

// newStatusEnv serves the default pool and its KWOKNodeClass; before runs
// ahead of each NodePool status patch.
func newStatusEnv(t *testing.T, before func(ctx context.Context, c client.Client)) statusEnv {
	t.Helper()
	s := testScheme(t)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{kwokv1alpha1.SchemeGroupVersion})
	mapper.Add(kwokv1alpha1.SchemeGroupVersion.WithKind("KWOKNodeClass"), meta.RESTScopeRoot)
	api := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithStatusSubresource(&karpv1.NodePool{}).
		WithObjects(pool(), &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}).Build()
	writes := 0
	count := func(obj client.Object) {
		if _, ok := obj.(*karpv1.NodePool); ok {
			writes++
		}
	}
	kube := interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count(obj)
			if before != nil {
				before(ctx, c)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count(obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return statusEnv{api: api, clock: clk, controller: New(kube, clk, nil), writes: &writes}
}

func (e statusEnv) reconcile(t *testing.T) (*karpv1.NodePool, reconcile.Result) {
	t.Helper()
	ctx := context.Background()
	res, err := e.controller.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "default"}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	np := &karpv1.NodePool{}
	if err := e.api.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	return np, res
}

func (e statusEnv) addNode(t *testing.T, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	if err := e.api.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

func nodes(np *karpv1.NodePool) int64 {
	if np.Status.Nodes == nil {
		return -1
	}
	return *np.Status.Nodes
}

// 50 node changes within the interval after a write make no write; the
// pool is requeued, and its final count and resources are written once the
// interval is over. A reconcile that changes nothing writes nothing.
func TestStatusWrittenAtMostOncePerInterval(t *testing.T) {
	e := newStatusEnv(t, nil)
	np, _ := e.reconcile(t)
	if *e.writes != 1 || !IsReady(np) || nodes(np) != 0 {
		t.Fatalf("first reconcile: %d writes, ready %v, nodes %d", *e.writes, IsReady(np), nodes(np))
	}
	start := e.clock.Now()
	for i := range 50 {
		e.clock.Step(StatusInterval / 100)
		e.addNode(t, fmt.Sprintf("n%d", i))
		_, res := e.reconcile(t)
		if left := start.Add(StatusInterval).Sub(e.clock.Now()); res.RequeueAfter != left {
			t.Fatalf("change %d: requeue after %v, want %v (the rest of the interval)", i, res.RequeueAfter, left)
		}
	}
	if np, _ = e.reconcile(t); *e.writes != 1 || nodes(np) != 0 {
		t.Fatalf("within the interval: %d writes, %d nodes recorded; want 1 write, 0 nodes", *e.writes, nodes(np))
	}
	e.clock.SetTime(start.Add(StatusInterval))
	np, res := e.reconcile(t)
	cpu := np.Status.Resources[corev1.ResourceCPU]
	if *e.writes != 2 || nodes(np) != 50 || cpu.Value() != 100 || res.RequeueAfter != 0 {
		t.Errorf("after the interval: %d writes, %d nodes, %s cpu, requeue %v; want 2 writes, 50 nodes, 100 cpu", *e.writes, nodes(np), cpu.String(), res.RequeueAfter)
	}
	e.clock.Step(time.Hour)
	if e.reconcile(t); *e.writes != 2 {
		t.Errorf("%d writes after a reconcile that changed nothing, want 2", *e.writes)
	}
}

// A Ready transition is written at once, within the interval, with the
// counts of the moment.
func TestReadyTransitionWrittenAtOnce(t *testing.T) {
	ctx := context.Background()
	e := newStatusEnv(t, nil)
	e.reconcile(t)
	e.clock.Step(StatusInterval / 10)
	e.addNode(t, "n1")
	class := &kwokv1alpha1.KWOKNodeClass{}
	if err := e.api.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	if err := e.api.Delete(ctx, class); err != nil {
		t.Fatal(err)
	}
	np, _ := e.reconcile(t)
	ready := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady)
	if *e.writes != 2 || ready == nil || ready.Status != metav1.ConditionFalse || nodes(np) != 1 {
		t.Errorf("%d writes, Ready %v, %d nodes; want 2 writes, Ready False, 1 node", *e.writes, ready, nodes(np))
	}
}

// A condition another controller adds to the pool while this one computes
// its status survives: the write conflicts and is made again on the fresh
// pool, without failing the reconcile.
func TestStatusConflictKeepsAnotherWritersCondition(t *testing.T) {
	first := true
	e := newStatusEnv(t, func(ctx context.Context, c client.Client) {
		if !first {
			return
		}
		first = false
		np := &karpv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			panic(err)
		}
		np.Status.Conditions = append(np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeRegistrationHealthy,
			Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: metav1.Now()})
		if err := c.Status().Update(ctx, np); err != nil {
			panic(err)
		}
	})
	np, _ := e.reconcile(t)
	if *e.writes != 2 {
		t.Errorf("%d status patches, want 2 (one conflicting, one on the fresh pool)", *e.writes)
	}
	if !IsReady(np) || meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy) == nil {
		t.Errorf("conditions %v: want Ready and the other writer's NodeRegistrationHealthy", np.Status.Conditions)
	}
}
