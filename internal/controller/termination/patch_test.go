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
