package nodeclaim

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/kwok"
)

// When the status write after a launch fails (an error, or a conflict
// with nothing newer to read: the pass requeues without an error) the
// next reconcile, by the same controller or by a fresh one after a
// restart, records the instance launched instead of launching another.
func TestLaunchRecordedOnceWhenTheStatusWriteFails(t *testing.T) {
	conflict := apierrors.NewConflict(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), "web-abc", errors.New("changed meanwhile"))
	for _, tc := range []struct {
		name    string
		err     error
		restart bool
		// failed: the first reconcile reports an error (else it requeues).
		failed bool
	}{
		{"server error", apierrors.NewInternalError(errors.New("etcd timed out")), false, true},
		{"conflict", conflict, false, false},
		{"conflict, then a restart", conflict, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			failures := 1
			e := newEnv(t, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if nc, ok := obj.(*karpv1.NodeClaim); ok && failures > 0 && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
					failures--
					return tc.err
				}
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			}})
			e.create(t, "web-abc")
			req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-abc"}}
			res, err := e.controller.Reconcile(ctx, req)
			if (err != nil) != tc.failed || !tc.failed && res.RequeueAfter == 0 {
				t.Fatalf("the reconcile whose status write failed: requeue after %v, error %v; want an error %v", res.RequeueAfter, err, tc.failed)
			}
			controller := e.controller
			if tc.restart {
				m, err := metrics.New(prometheus.NewRegistry(), "test", "")
				if err != nil {
					t.Fatal(err)
				}
				types, err := e.provider.GetInstanceTypes(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				catalogTypes := make([]catalog.InstanceType, 0, len(types))
				for _, it := range types {
					catalogTypes = append(catalogTypes, *it)
				}
				controller = New(e.kube, kwok.New(e.kube, catalogTypes), e.clock, state.NewUnavailableOfferings(e.clock, state.DefaultUnavailableTTL), record.NewFakeRecorder(100), m)
			}
			if _, err := controller.Reconcile(ctx, req); err != nil {
				t.Fatalf("the reconcile after: %v", err)
			}
			nodes := &corev1.NodeList{}
			if err := e.kube.List(ctx, nodes); err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != 1 {
				t.Errorf("%d kwok nodes for one NodeClaim, want 1", len(nodes.Items))
			}
			nc, _ := e.reconcile(t, "web-abc")
			if condition(nc, "Launched") != "True/Launched" || nc.Status.ProviderID != "kwok://web-abc" {
				t.Errorf("after the retry: launched %s, provider ID %q", condition(nc, "Launched"), nc.Status.ProviderID)
			}
		})
	}
}
