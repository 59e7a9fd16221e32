package termination

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// PatchLocked writes nothing when there is nothing to change, and gives up
// with the conflict (for the caller's next reconcile) when every attempt
// conflicts, instead of spinning.
func TestPatchLocked(t *testing.T) {
	cases := []struct {
		name string
		// conflicts: every patch conflicts.
		conflicts bool
		change    bool
		patches   int
		conflict  bool
	}{
		{"nothing to change", false, false, 0, false},
		{"written", false, true, 1, false},
		{"always conflicting", true, true, conflictRetries + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			patches := 0
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			base := fake.NewClientBuilder().WithScheme(terminationScheme(t)).WithObjects(node).Build()
			kube := interceptor.NewClient(base, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				patches++
				if tc.conflicts {
					return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, obj.GetName(), nil)
				}
				return c.Patch(ctx, obj, patch, opts...)
			}})
			current := &corev1.Node{}
			if err := base.Get(context.Background(), client.ObjectKey{Name: "n1"}, current); err != nil {
				t.Fatal(err)
			}
			err := PatchLocked(context.Background(), kube, current, func(n *corev1.Node) bool {
				if tc.change {
					n.Spec.Unschedulable = true
				}
				return tc.change
			})
			if patches != tc.patches || apierrors.IsConflict(err) != tc.conflict || err != nil && !tc.conflict {
				t.Errorf("%d patches, error %v; want %d patches, conflict %v", patches, err, tc.patches, tc.conflict)
			}
		})
	}
}

// After a conflict, PatchLockedReading reads the object again through the
// reader it is given (the manager's APIReader), not through the client's
// informer cache that the conflict says is behind: one stale cache no
// longer burns every attempt. An object deleted and created again under
// the same name in between is not the one the caller decided about: it is
// left alone and the answer is NotFound.
func TestPatchLockedRereadsFromTheAPI(t *testing.T) {
	cases := []struct {
		name string
		// staleCache: the client's reads answer the copy first read.
		staleCache bool
		// recreated: between the read and the write, the node is deleted
		// and created again with another UID.
		recreated bool
		// want: the node's unschedulable flag in the API at the end.
		want     bool
		notFound bool
	}{
		{"changed behind a stale cache", true, false, true, false},
		{"deleted and created again", false, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			api := fake.NewClientBuilder().WithScheme(terminationScheme(t)).
				WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}).Build()
			read := &corev1.Node{}
			if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, read); err != nil {
				t.Fatal(err)
			}
			stale := read.DeepCopy()
			// Another actor writes after the read: the caller's copy and the
			// cache both hold the old resourceVersion from now on.
			other := read.DeepCopy()
			other.Labels = map[string]string{"example.com/other": "x"}
			if err := api.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			if tc.recreated {
				if err := api.Delete(ctx, other); err != nil {
					t.Fatal(err)
				}
				if err := api.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-2"}}); err != nil {
					t.Fatal(err)
				}
			}
			var kube client.Client = api
			if tc.staleCache {
				kube = interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					stale.DeepCopyInto(obj.(*corev1.Node)) // an informer cache that lags
					return nil
				}})
			}
			err := PatchLockedReading(ctx, kube, api, read, func(n *corev1.Node) bool {
				n.Spec.Unschedulable = true
				return true
			})
			if apierrors.IsNotFound(err) != tc.notFound || err != nil && !tc.notFound {
				t.Fatalf("error %v, want not found %v", err, tc.notFound)
			}
			now := &corev1.Node{}
			if err := api.Get(ctx, client.ObjectKey{Name: "n1"}, now); err != nil {
				t.Fatal(err)
			}
			if now.Spec.Unschedulable != tc.want {
				t.Errorf("node %s (uid %s) unschedulable %v, want %v", now.Name, now.UID, now.Spec.Unschedulable, tc.want)
			}
			if !tc.recreated && now.Labels["example.com/other"] != "x" {
				t.Errorf("the other actor's label was lost: %v", now.Labels)
			}
		})
	}
}
