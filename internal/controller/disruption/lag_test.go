package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// lagging makes the loop's client read NodeClaims like the manager's
// cache: after the loop writes one, its next lag Gets return the object
// as it was before the write; after the loop creates one, its next lag
// Gets find nothing (the informer has not delivered the event yet).
type lagging struct {
	lag   int
	stale map[string]*karpv1.NodeClaim
	left  map[string]int
}

// catchUp: the cache has delivered every event.
func (g *lagging) catchUp() { g.left = map[string]int{} }

func (g *lagging) write(ctx context.Context, c client.Reader, name string, do func() error) error {
	old := &karpv1.NodeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, old); err != nil {
		old = nil
	}
	if err := do(); err != nil {
		return err
	}
	g.stale[name], g.left[name] = old, g.lag
	return nil
}

func (g *lagging) funcs() *interceptor.Funcs {
	g.stale, g.left = map[string]*karpv1.NodeClaim{}, map[string]int{}
	return &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if nc, ok := obj.(*karpv1.NodeClaim); ok && g.left[key.Name] > 0 {
				g.left[key.Name]--
				if g.stale[key.Name] == nil {
					return apierrors.NewNotFound(schema.GroupResource{Group: karpv1.Group, Resource: "nodeclaims"}, key.Name)
				}
				g.stale[key.Name].DeepCopyInto(nc)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*karpv1.NodeClaim); ok {
				return g.write(ctx, c, obj.GetName(), func() error { return c.Create(ctx, obj, opts...) })
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*karpv1.NodeClaim); ok {
				return g.write(ctx, c, obj.GetName(), func() error { return c.Patch(ctx, obj, patch, opts...) })
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, _ string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*karpv1.NodeClaim); ok {
				return g.write(ctx, c, obj.GetName(), func() error { return c.Status().Update(ctx, obj, opts...) })
			}
			return c.Status().Update(ctx, obj, opts...)
		},
	}
}

// laggingDriftEnv: web-1 is drifted and runs three pods of 1.5 CPU; the
// pool's only instance type has 2 CPUs (three replacements). The loop's
// client lags its own NodeClaim writes by g.lag Gets.
func laggingDriftEnv(t *testing.T, g *lagging) (env, PoolSource) {
	t.Helper()
	return driftEnvWith(t, g.funcs())
}

// When the loop's client is the manager's cache, which lags the loop's own
// writes (a stale copy after a status update or patch, nothing yet after a
// create), a drifted node is still replaced: a write that conflicts, or
// finds nothing to do on a cached copy, reads again through the uncached
// reader, and a replacement missing from the cache is not taken for gone.
func TestLoopReplacesThroughALaggingCache(t *testing.T) {
	for _, lag := range []int{1, 3, 5, 8} {
		t.Run(fmt.Sprintf("cache %d reads behind", lag), func(t *testing.T) {
			ctx := context.Background()
			g := &lagging{lag: lag}
			e, pools := laggingDriftEnv(t, g)
			l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(1000), nil, logr.Discard(), pools, Options{ReplacementTimeout: time.Minute, APIReader: e.store})
			_, err := l.Pass(ctx)
			if err != nil {
				t.Errorf("first pass: %v", err)
			}
			nc := e.claim(t)
			if nc.Annotations[ReplacementsAnnotation] == "" || meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil || !tainted(ctx, t, e.kube) {
				t.Errorf("after the first pass: replacements %q, DisruptionReason %v, tainted %v: want the decision written and the node tainted",
					nc.Annotations[ReplacementsAnnotation], meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil, tainted(ctx, t, e.kube))
			}
			if !run(t, e, l, e.cluster, 100, nil) {
				t.Errorf("web-1 never replaced")
			}
			if n := liveReplacements(t, e.kube); n != 3 {
				t.Errorf("%d replacement NodeClaims, want 3: nothing bought twice", n)
			}
		})
	}
}

// Just after a command, the cache may show the node's disrupted taint but
// not yet the NodeClaim's deletion: the sweep must not take the taint for
// an orphan and lift it from a node being drained.
func TestSweepKeepsTheTaintOfANodeJustDisrupted(t *testing.T) {
	ctx := context.Background()
	g := &lagging{lag: 3}
	e := newEnvWith(t, g.funcs())
	np := &karpv1.NodePool{}
	if err := e.store.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	if err := e.store.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodePool(np)
	nc := e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
	if err := e.store.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), nil, Options{APIReader: e.store})
	wait, err := l.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := e.store.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	if e.claim(t).DeletionTimestamp == nil || !hasDisruptedTaint(node) {
		t.Fatal("setup: the drifted node was not disrupted and tainted")
	}
	e.cluster.UpdateNode(node) // the Node's event has come, the NodeClaim's not yet
	e.clock.Step(wait)
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	if !hasDisruptedTaint(node) {
		t.Errorf("%s after the command the sweep lifted the disrupted taint of node web-1, whose NodeClaim is being deleted", wait)
	}
}
