package disruption

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// faults injects API failures into the loop's client and watches what it
// deletes.
type faults struct {
	// creates counts NodeClaim Creates.
	creates int
	// create decides the fate of the nth NodeClaim Create (1-based):
	// "fail" (nothing created), "lose" (created, the answer lost), "".
	create func(n int) string
	// need is how many initialized replacements the candidate's deletion
	// requires.
	need int
	// early lists the candidate deletions made before that many
	// replacements were initialized.
	early []string
	// conflictOnce: before the loop's first write of a Node, another actor
	// adds a taint of its own.
	conflictOnce bool
}

func (f *faults) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*karpv1.NodeClaim); !ok || f.create == nil {
				return c.Create(ctx, obj, opts...)
			}
			f.creates++
			switch f.create(f.creates) {
			case "fail":
				return apierrors.NewInternalError(errors.New("injected: create failed"))
			case "lose":
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err
				}
				return apierrors.NewTimeoutError("injected: the answer was lost", 1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if obj.GetName() == "web-1" {
				if _, ok := obj.(*karpv1.NodeClaim); ok {
					if n := initializedOthers(ctx, c); n < f.need {
						f.early = append(f.early, fmt.Sprintf("web-1 deleted with %d of %d replacements initialized", n, f.need))
					}
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.Node); ok && f.conflictOnce {
				f.conflictOnce = false
				node := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), node); err != nil {
					return err
				}
				node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
				if err := c.Update(ctx, node); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
}

// initializedOthers counts the NodeClaims other than web-1 that are
// initialized and not being deleted.
func initializedOthers(ctx context.Context, c client.Client) int {
	var list karpv1.NodeClaimList
	if err := c.List(ctx, &list); err != nil {
		return 0
	}
	n := 0
	for _, nc := range list.Items {
		if nc.Name != "web-1" && nc.DeletionTimestamp == nil && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			n++
		}
	}
	return n
}

// driftEnv: web-1 is drifted and runs three pods of 1.5 CPU; the pool's
// only instance type has 2 CPUs, so replacing web-1 takes three
// NodeClaims.
func driftEnv(t *testing.T, f *faults) (env, PoolSource) {
	t.Helper()
	return driftEnvWith(t, f.funcs())
}

// driftEnvWith is driftEnv's cluster behind the given interceptors; the
// setup writes go straight to the API, past them.
func driftEnvWith(t *testing.T, funcs *interceptor.Funcs) (env, PoolSource) {
	t.Helper()
	var pods []client.Object
	for i := range 3 {
		p := boundPod(fmt.Sprintf("p%d", i))
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &yes}}
		pods = append(pods, p)
	}
	e := newEnvWith(t, funcs, pods...)
	ctx := context.Background()
	nc := e.claim(t)
	nc.Labels[corev1.LabelInstanceTypeStable] = "m-8"
	if err := e.store.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: metav1.NewTime(epoch)})
	if err := e.store.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	types, err := catalog.Parse("test", []byte(`[{"name": "m-2", "architecture": "amd64", "operatingSystems": ["linux"],
	  "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	return e, fixedPools{[]sched.NodePool{{NodePool: np, InstanceTypes: []*catalog.InstanceType{&types[0]}}}}
}

// syncModel feeds a model what the API holds now, as the informers do.
func syncModel(t *testing.T, kube client.Client, cluster *state.Cluster) {
	t.Helper()
	ctx := context.Background()
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for i := range claims.Items {
		live[claims.Items[i].Name] = true
		cluster.UpdateNodeClaim(&claims.Items[i])
	}
	inv := cluster.Inventory()
	for _, v := range inv.Nodes {
		if v.Claim != nil && !live[v.Claim.Name] {
			cluster.DeleteNodeClaim(v.Claim.Name)
		}
	}
	for _, nc := range inv.Pending {
		if !live[nc.Name] {
			cluster.DeleteNodeClaim(nc.Name)
		}
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		cluster.UpdateNode(&nodes.Items[i])
	}
}

// kubelet initializes every replacement NodeClaim (any but web-1).
func kubelet(t *testing.T, kube client.Client) {
	t.Helper()
	ctx := context.Background()
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Name == "web-1" || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			continue
		}
		for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c})
		}
		if err := kube.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
}

// liveReplacements counts the NodeClaims other than web-1 not being
// deleted.
func liveReplacements(t *testing.T, kube client.Client) int {
	t.Helper()
	var claims karpv1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nc := range claims.Items {
		if nc.Name != "web-1" && nc.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// run drives the loop (and the kubelet, and the model's feed) until web-1
// is being deleted or steps run out; it reports whether web-1 went.
func run(t *testing.T, e env, l *Loop, cluster *state.Cluster, steps int, check func()) bool {
	t.Helper()
	ctx := context.Background()
	for range steps {
		if _, err := l.Pass(ctx); err != nil {
			t.Logf("pass at %s: %v", e.clock.Now().Sub(epoch), err)
		}
		syncModel(t, e.store, cluster)
		if check != nil {
			check()
		}
		if e.claim(t).DeletionTimestamp != nil {
			return true
		}
		kubelet(t, e.store)
		syncModel(t, e.store, cluster)
		e.clock.Step(5 * time.Second)
	}
	return false
}

// A drifted node goes only once ALL of its replacements exist and are
// initialized, whatever happens to their creation; nothing is bought
// twice.
func TestLoopDeletesOnlyAfterAllReplacementsInitialize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create func(n int) string
	}{
		{"every create succeeds", nil},
		{"the first create fails once", func(n int) string { return map[bool]string{true: "fail"}[n == 1] }},
		{"the second of three fails once", func(n int) string { return map[bool]string{true: "fail"}[n == 2] }},
		{"the answer of the first create is lost", func(n int) string { return map[bool]string{true: "lose"}[n == 1] }},
		{"every create fails for two minutes", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &faults{create: tc.create, need: 3}
			e, pools := driftEnv(t, f)
			if tc.create == nil && tc.name != "every create succeeds" {
				f.create = func(int) string {
					if e.clock.Now().Before(epoch.Add(2 * time.Minute)) {
						return "fail"
					}
					return ""
				}
			}
			l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), pools, Options{ReplacementTimeout: time.Minute})
			if !run(t, e, l, e.cluster, 200, nil) {
				t.Fatalf("web-1 was never disrupted (tainted %v)", tainted(context.Background(), t, e.kube))
			}
			if len(f.early) > 0 {
				t.Errorf("deleted before its replacements were up: %v", f.early)
			}
			if n := liveReplacements(t, e.kube); n != 3 {
				t.Errorf("%d replacement NodeClaims left, want exactly 3 (none missing, none bought twice)", n)
			}
		})
	}
}

// The loop is dropped mid-decision (every in-memory structure gone, the
// cluster model too) and a new one on the same API finishes the job: no
// taint outlives its decision, web-1 goes only after all of its
// replacements are initialized, and no replacement is left over.
func TestLoopResumesADecisionAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create func(n int) string
		// adopted: the new loop carries the first loop's decision on
		// rather than buying again.
		adopted bool
	}{
		{"after the taint, before any replacement", func(n int) string { return map[bool]string{true: "fail"}[n == 1] }, false},
		{"after two of three replacements", func(n int) string { return map[bool]string{true: "fail"}[n == 3] }, false},
		{"after the answer of a create was lost", func(n int) string { return map[bool]string{true: "lose"}[n == 2] }, true},
		{"after every replacement was created", func(int) string { return "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := &faults{create: tc.create, need: 3}
			e, pools := driftEnv(t, f)
			opts := Options{ReplacementTimeout: time.Minute}
			first := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), pools, opts)
			_, _ = first.Pass(ctx)
			if !tainted(ctx, t, e.kube) {
				t.Fatal("the first loop did not start the decision")
			}
			f.create = func(int) string { return "" }
			e.clock.Step(5 * time.Second)
			// The restart: a new model fed from the API, a new loop.
			cluster := state.NewCluster(e.clock)
			cluster.MarkSynced()
			np := &karpv1.NodePool{}
			if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
				t.Fatal(err)
			}
			cluster.UpdateNodePool(np)
			var pods corev1.PodList
			if err := e.kube.List(ctx, &pods); err != nil {
				t.Fatal(err)
			}
			for i := range pods.Items {
				cluster.UpdatePod(&pods.Items[i])
			}
			syncModel(t, e.kube, cluster)
			second := NewLoop(e.kube, cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), pools, opts)
			var stuck []string
			sawDeciding := false
			check := func() {
				deciding := second.Deciding("web-1")
				sawDeciding = sawDeciding || deciding
				if e.claim(t).DeletionTimestamp == nil && tainted(ctx, t, e.kube) && !deciding {
					stuck = append(stuck, e.clock.Now().Sub(epoch).String())
				}
			}
			if !run(t, e, second, cluster, 200, check) {
				t.Fatalf("the new loop never disrupted web-1 (tainted %v)", tainted(ctx, t, e.kube))
			}
			if len(f.early) > 0 {
				t.Errorf("deleted before its replacements were up: %v", f.early)
			}
			if len(stuck) > 0 {
				t.Errorf("web-1 tainted with no live decision at %v", stuck)
			}
			if n := liveReplacements(t, e.kube); n != 3 {
				t.Errorf("%d replacement NodeClaims left, want exactly 3 (the first loop's leftovers removed or adopted)", n)
			}
			if !sawDeciding || second.Deciding("web-1") {
				t.Errorf("Deciding(web-1): seen true %v, true after web-1 went %v: want true while the decision lives, false after", sawDeciding, second.Deciding("web-1"))
			}
			if tc.adopted && f.creates != 3 {
				t.Errorf("%d NodeClaim creates, want 3: the new loop should carry on the first loop's replacements", f.creates)
			}
		})
	}
}

// A disrupted taint and a DisruptionReason that no live decision holds are
// removed at the start of a pass; those of a NodeClaim being deleted stay,
// and so does the taint of a node the interruption controller holds.
func TestLoopRemovesOrphanedDisruptionMarks(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		deleting, interrupted bool
		wantTaint, wantReason bool
	}{
		{"no decision holds them: removed", false, false, false, false},
		{"the NodeClaim is being deleted: kept", true, false, true, true},
		{"an interruption holds the node: its taint kept", false, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, boundPod("a"))
			nc := e.claim(t)
			if tc.interrupted {
				nc.Annotations = map[string]string{interruptionAnnotation: "SpotInterrupted"}
				if err := e.kube.Update(ctx, nc); err != nil {
					t.Fatal(err)
				}
				nc = e.claim(t)
			}
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(karpv1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(epoch)})
			if err := e.kube.Status().Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
			node := &corev1.Node{}
			if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
				t.Fatal(err)
			}
			node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
			if err := e.kube.Update(ctx, node); err != nil {
				t.Fatal(err)
			}
			if tc.deleting {
				if err := e.kube.Delete(ctx, e.claim(t)); err != nil {
					t.Fatal(err)
				}
			}
			syncModel(t, e.kube, e.cluster)
			l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(10), nil, logr.Discard(), nil, Options{})
			if _, err := l.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			marked := meta.FindStatusCondition(e.claim(t).Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil
			if got := tainted(ctx, t, e.kube); got != tc.wantTaint || marked != tc.wantReason {
				t.Errorf("tainted %v, DisruptionReason %v: want %v, %v", got, marked, tc.wantTaint, tc.wantReason)
			}
		})
	}
}

// Another actor adds a taint between the loop's read of the node and its
// write: both taints survive.
func TestLoopTaintKeepsAConcurrentTaint(t *testing.T) {
	ctx := context.Background()
	f := &faults{conflictOnce: true}
	e := newEnvWith(t, f.funcs())
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	nc := e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(10), nil, logr.Discard(), nil, Options{})
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, taint := range node.Spec.Taints {
		keys = append(keys, taint.Key)
	}
	if len(keys) != 2 {
		t.Errorf("node taints %v: want the other actor's and karpenter.sh/disrupted", keys)
	}
	if f.conflictOnce {
		t.Fatal("the concurrent write was not injected")
	}
}
