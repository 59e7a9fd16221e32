package fieldpatch

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func cond(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Now()}
}

// A status write computed from a copy read before another controller
// added its condition keeps that condition: the write conflicts, and the
// change is made again on the fresh copy. A write that changes nothing
// sends nothing.
func TestStatusKeepsConditionsWrittenMeanwhile(t *testing.T) {
	cases := []struct {
		name string
		// meanwhile: another controller's condition lands between our read
		// and our write.
		meanwhile bool
		// change: our condition is new.
		change  bool
		patches int
	}{
		{"nothing to change", false, false, 0},
		{"no concurrent writer", false, true, 1},
		{"a condition added meanwhile", true, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "u1"}}
			nc.Status.Conditions = []metav1.Condition{cond("Launched", "Launched")}
			base := fake.NewClientBuilder().WithScheme(testScheme(t)).WithStatusSubresource(&karpv1.NodeClaim{}).WithObjects(nc).Build()
			read := &karpv1.NodeClaim{}
			if err := base.Get(ctx, client.ObjectKey{Name: "c1"}, read); err != nil {
				t.Fatal(err)
			}
			if tc.meanwhile {
				other := read.DeepCopy()
				other.Status.Conditions = append(other.Status.Conditions, cond("DisruptionReason", "Drifted"))
				if err := base.Status().Update(ctx, other); err != nil {
					t.Fatal(err)
				}
			}
			patches := 0
			kube := interceptor.NewClient(base, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			}})
			written, err := Status(ctx, kube, nil, read, func(nc *karpv1.NodeClaim) {
				if tc.change {
					meta.SetStatusCondition(&nc.Status.Conditions, cond("Registered", "Registered"))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if written != tc.change || patches != tc.patches {
				t.Errorf("written %v after %d patches, want %v after %d", written, patches, tc.change, tc.patches)
			}
			now := &karpv1.NodeClaim{}
			if err := base.Get(ctx, client.ObjectKey{Name: "c1"}, now); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				t    string
				want bool
			}{{"Launched", true}, {"Registered", tc.change}, {"DisruptionReason", tc.meanwhile}} {
				if got := meta.FindStatusCondition(now.Status.Conditions, c.t) != nil; got != c.want {
					t.Errorf("condition %s present %v, want %v (conditions %v)", c.t, got, c.want, now.Status.Conditions)
				}
			}
		})
	}
}

// A patch of maps only (labels) goes without a lock: a copy older than
// another actor's label write neither conflicts nor drops that label.
func TestMapPatchesMergeWithoutALock(t *testing.T) {
	ctx := context.Background()
	base := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}}}).Build()
	read := &corev1.Node{}
	if err := base.Get(ctx, client.ObjectKey{Name: "n1"}, read); err != nil {
		t.Fatal(err)
	}
	other := read.DeepCopy()
	other.Labels["b"] = "2"
	if err := base.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	written, err := Object(ctx, base, nil, read, func(n *corev1.Node) { n.Labels["c"] = "3" })
	if err != nil || !written {
		t.Fatalf("written %v, error %v", written, err)
	}
	now := &corev1.Node{}
	if err := base.Get(ctx, client.ObjectKey{Name: "n1"}, now); err != nil {
		t.Fatal(err)
	}
	if now.Labels["a"] != "1" || now.Labels["b"] != "2" || now.Labels["c"] != "3" {
		t.Errorf("labels %v, want a, b and c", now.Labels)
	}
}

// When the reader answers the very version that conflicted (a cache
// behind the API), the conflict is handed back after one write instead of
// being written again; with a reader that sees the newer version (the
// APIReader), the write is made again on it and succeeds.
func TestConflictWithALaggingCache(t *testing.T) {
	cases := []struct {
		name      string
		apiReader bool
		patches   int
		conflict  bool
	}{
		{"reading again through the cache", false, 1, true},
		{"reading again through the API", true, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			api := fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}).Build()
			read := &corev1.Node{}
			if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, read); err != nil {
				t.Fatal(err)
			}
			stale := read.DeepCopy()
			other := read.DeepCopy()
			other.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}
			if err := api.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			patches := 0
			cache := interceptor.NewClient(api, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					stale.DeepCopyInto(obj.(*corev1.Node))
					return nil
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					patches++
					return c.Patch(ctx, obj, p, opts...)
				},
			})
			var reader client.Reader
			if tc.apiReader {
				reader = api
			}
			_, err := Object(ctx, cache, reader, read, func(n *corev1.Node) {
				if !hasTaint(n, "ours") {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "ours", Effect: corev1.TaintEffectNoSchedule})
				}
			})
			if IsConflict(err) != tc.conflict || err != nil && !tc.conflict {
				t.Fatalf("error %v, want conflict %v", err, tc.conflict)
			}
			if patches != tc.patches {
				t.Errorf("%d patches, want %d", patches, tc.patches)
			}
			now := &corev1.Node{}
			if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, now); err != nil {
				t.Fatal(err)
			}
			if !hasTaint(now, "other") || hasTaint(now, "ours") == tc.conflict {
				t.Errorf("taints %v: want other's kept and ours written %v", now.Spec.Taints, !tc.conflict)
			}
		})
	}
}

// An object deleted and created again under the same name between the
// read and the write is not patched.
func TestRecreatedObjectIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	api := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}).Build()
	read := &corev1.Node{}
	if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, read); err != nil {
		t.Fatal(err)
	}
	if err := api.Delete(ctx, read.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := api.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u2"}}); err != nil {
		t.Fatal(err)
	}
	_, err := Object(ctx, api, nil, read, func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, "example.com/f") })
	if !apierrors.IsNotFound(err) {
		t.Fatalf("error %v, want NotFound", err)
	}
	now := &corev1.Node{}
	if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, now); err != nil {
		t.Fatal(err)
	}
	if len(now.Finalizers) != 0 {
		t.Errorf("the new node got finalizers %v", now.Finalizers)
	}
}

// A conflict on every attempt ends after Retries+1 writes.
func TestConflictsEnd(t *testing.T) {
	ctx := context.Background()
	api := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}).Build()
	patches := 0
	kube := interceptor.NewClient(api, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		patches++
		// Another writer always gets there first.
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), n); err != nil {
			return err
		}
		n.Annotations = map[string]string{"beat": n.ResourceVersion}
		if err := c.Update(ctx, n); err != nil {
			return err
		}
		return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, obj.GetName(), nil)
	}})
	read := &corev1.Node{}
	if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, read); err != nil {
		t.Fatal(err)
	}
	_, err := Object(ctx, kube, nil, read, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "ours", Effect: corev1.TaintEffectNoSchedule}}
	})
	if !IsConflict(err) || patches != Retries+1 {
		t.Errorf("%d patches, error %v; want %d and a conflict", patches, err, Retries+1)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// The owner's conditions change; the others' stay as the fresh copy has
// them.
func TestOwnedConditions(t *testing.T) {
	was := []metav1.Condition{cond("Launched", "Launched"), cond("Drifted", "A")}
	want := []metav1.Condition{cond("Launched", "Launched"), cond("Registered", "Registered")}
	fresh := []metav1.Condition{cond("Launched", "Launched"), cond("Drifted", "A"), cond("DisruptionReason", "Drifted")}
	OwnedConditions(&fresh, was, want, "Launched", "Registered", "Drifted")
	var got []string
	for _, c := range fresh {
		got = append(got, c.Type)
	}
	if len(got) != 3 || meta.FindStatusCondition(fresh, "Drifted") != nil || meta.FindStatusCondition(fresh, "Registered") == nil || meta.FindStatusCondition(fresh, "DisruptionReason") == nil {
		t.Errorf("conditions %v, want Launched, DisruptionReason, Registered", got)
	}
}
