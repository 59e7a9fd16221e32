package disruption

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
)

// claimWrites counts the Claims reconciler's NodeClaim status writes; meddle,
// when set, runs before each status patch goes through and may answer in
// its stead.
type claimWrites struct {
	patches, updates int
	meddle           func(ctx context.Context, c client.Client) error
}

func (w *claimWrites) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.patches++
			if w.meddle != nil {
				if err := w.meddle(ctx, c); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.updates++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// Consolidatable is written once; the passes after it that change nothing
// write nothing.
func TestClaimsWriteOnlyChanges(t *testing.T) {
	ctx := context.Background()
	w := &claimWrites{}
	e := newEnvWith(t, w.funcs())
	c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
	e.clock.Step(2 * time.Minute)
	for range 3 {
		if _, err := c.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		e.clock.Step(time.Minute)
	}
	if !meta.IsStatusConditionTrue(e.claim(t).Status.Conditions, karpv1.ConditionTypeConsolidatable) {
		t.Fatal("not Consolidatable")
	}
	if w.patches != 1 || w.updates != 0 {
		t.Errorf("%d status patches and %d updates in three passes, want 1 patch", w.patches, w.updates)
	}
}

// The lifecycle controller and the disruption loop write their conditions
// while this reconciler computes Consolidatable: its write conflicts, is
// made again on the fresh claim within the same pass, and theirs survive.
// A conflict with nothing newer to read (a cache behind) requeues the claim
// without an error, and the pod event is seen again on the next pass.
func TestClaimsConflicts(t *testing.T) {
	ctx := context.Background()
	t.Run("a condition written meanwhile survives", func(t *testing.T) {
		w := &claimWrites{}
		w.meddle = func(ctx context.Context, c client.Client) error {
			if w.patches > 1 {
				return nil
			}
			nc := &karpv1.NodeClaim{}
			if err := c.Get(ctx, client.ObjectKey{Name: "web-1"}, nc); err != nil {
				return err
			}
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: "Underutilized", LastTransitionTime: metav1.NewTime(epoch)})
			return c.Status().Update(ctx, nc)
		}
		e := newEnvWith(t, w.funcs())
		c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
		e.clock.Step(2 * time.Minute)
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}); err != nil {
			t.Fatal(err)
		}
		conds := e.claim(t).Status.Conditions
		for _, ct := range []string{karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeDisruptionReason, karpv1.ConditionTypeInitialized} {
			if !meta.IsStatusConditionTrue(conds, ct) {
				t.Errorf("%s not True in %v", ct, conds)
			}
		}
		if w.patches != 2 {
			t.Errorf("%d status patches, want 2 (one conflicting)", w.patches)
		}
	})
	t.Run("a cache behind requeues", func(t *testing.T) {
		w := &claimWrites{}
		w.meddle = func(context.Context, client.Client) error {
			if w.patches > 1 {
				return nil
			}
			return apierrors.NewConflict(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), "web-1", errors.New("changed meanwhile"))
		}
		e := newEnvWith(t, w.funcs(), boundPod("a"))
		c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
		req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
		e.clock.Step(30 * time.Second)
		res, err := c.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter != fieldpatch.ConflictRequeue || w.patches != 1 {
			t.Fatalf("requeue after %v, error %v, %d patches; want a requeue after %v, no error, one patch", res.RequeueAfter, err, w.patches, fieldpatch.ConflictRequeue)
		}
		e.clock.Step(time.Second)
		if _, err := c.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if got := e.claim(t).Status.LastPodEventTime.Time; !got.Equal(epoch.Add(31 * time.Second)) {
			t.Errorf("lastPodEventTime %v, want the pod event recorded by the pass after the conflict", got)
		}
	})
}
