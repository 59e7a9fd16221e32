package kwok_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/providers/kwok"
)

// kubeletEnv is the emulated kubelet over controller-runtime's fake client.
// The kubelet reads through a "cache" that can lag: stale holds, by key,
// what a Get returns instead of the stored object (as an informer that has
// not seen the latest writes yet). Every write is recorded.
type kubeletEnv struct {
	kube    client.Client // the API server's view, no interception
	clock   *clocktesting.FakeClock
	kubelet *kwok.Kubelet

	mu     sync.Mutex
	stale  map[types.NamespacedName]client.Object
	writes []string // "patch status Node n", "create Lease kube-node-lease/n", ...
	// patches holds the data of every patch, in order.
	patches []string
	// forbidLeases makes Lease writes fail as RBAC would.
	forbidLeases bool
}

var start = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func newKubeletEnv(t *testing.T, opts kwok.KubeletOptions, objs ...client.Object) *kubeletEnv {
	t.Helper()
	e := &kubeletEnv{clock: clocktesting.NewFakeClock(start), stale: map[types.NamespacedName]client.Object{}}
	base := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithStatusSubresource(&corev1.Node{}, &corev1.Pod{}).Build()
	e.kube = base
	record := func(verb string, obj client.Object, patch client.Patch) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.writes = append(e.writes, verb+" "+typeName(obj)+" "+client.ObjectKeyFromObject(obj).String())
		if patch != nil {
			data, err := patch.Data(obj)
			if err != nil {
				t.Errorf("patch data: %v", err)
			}
			e.patches = append(e.patches, string(data))
		}
	}
	leaseWrite := func(obj client.Object) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := obj.(*coordinationv1.Lease); ok && e.forbidLeases {
			return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, obj.GetName(), nil)
		}
		return nil
	}
	cached := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			e.mu.Lock()
			old, ok := e.stale[key]
			e.mu.Unlock()
			if ok && typeName(old) == typeName(obj) {
				copyInto(old, obj)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := leaseWrite(obj); err != nil {
				return err
			}
			record("create", obj, nil)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", obj, nil)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := leaseWrite(obj); err != nil {
				return err
			}
			record("patch", obj, patch)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record("update "+sub, obj, nil)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			record("patch "+sub, obj, patch)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			// The fake client checks only resource-version preconditions;
			// check the UID as the API server does.
			record("delete", obj, nil)
			o := (&client.DeleteOptions{}).ApplyOptions(opts)
			stored := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				return err
			}
			if p := o.Preconditions; p != nil && p.UID != nil && *p.UID != stored.GetUID() {
				return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(), errPrecondition)
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	e.kubelet = kwok.NewKubelet(cached, e.clock, opts)
	return e
}

var errPrecondition = errors.New("precondition failed: UID")

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Node:
		return "Node"
	case *corev1.Pod:
		return "Pod"
	case *coordinationv1.Lease:
		return "Lease"
	}
	return "other"
}

func copyInto(src, dst client.Object) {
	switch d := dst.(type) {
	case *corev1.Node:
		*d = *src.(*corev1.Node).DeepCopy()
	case *corev1.Pod:
		*d = *src.(*corev1.Pod).DeepCopy()
	}
}

// serveStale has the kubelet's reads of obj return it as it is now, while
// the test goes on changing the stored object.
func (e *kubeletEnv) serveStale(obj client.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stale[client.ObjectKeyFromObject(obj)] = obj.DeepCopyObject().(client.Object)
}

func (e *kubeletEnv) freshReads() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stale = map[types.NamespacedName]client.Object{}
}

// takeWrites returns the writes since the last call.
func (e *kubeletEnv) takeWrites() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.writes
	e.writes = nil
	return out
}

func (e *kubeletEnv) controller(t *testing.T, suffix string) watch.Controller {
	t.Helper()
	for _, c := range e.kubelet.Controllers() {
		if strings.HasSuffix(c.Name, suffix) {
			return c
		}
	}
	t.Fatalf("no controller %s", suffix)
	return watch.Controller{}
}

func (e *kubeletEnv) reconcileNode(t *testing.T, name string) (reconcile.Result, error) {
	t.Helper()
	return e.controller(t, ".node").Reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
}

func (e *kubeletEnv) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return n
}

func kwokNode(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(start)},
		Spec:       corev1.NodeSpec{ProviderID: kwok.ProviderIDPrefix + name, Taints: taints},
	}
}

func taintKeys(n *corev1.Node) []string {
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key)
	}
	return keys
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
