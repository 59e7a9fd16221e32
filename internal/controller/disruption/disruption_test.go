package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	kube client.Client
	// store is the fake API server itself, read without kube's
	// interceptors (an uncached reader).
	store   client.Client
	clock   *clocktesting.FakeClock
	cluster *state.Cluster
}

// newEnv: a NodePool consolidating empty nodes after 1m, and one
// initialized NodeClaim with its Ready node, plus objs.
func newEnv(t *testing.T, objs ...client.Object) env {
	t.Helper()
	return newEnvWith(t, nil, objs...)
}

// newEnvWith is newEnv with the API client's calls intercepted by funcs.
func newEnvWith(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) env {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{karpv1.LabelNodePool: "default"},
		CreationTimestamp: metav1.NewTime(epoch), Finalizers: []string{karpv1.TerminationFinalizer}}}
	nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	nc.Status = karpv1.NodeClaimStatus{ProviderID: "kwok://web-1", NodeName: "web-1",
		Conditions: []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(epoch)}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{karpv1.LabelNodePool: "default"}}, Spec: corev1.NodeSpec{ProviderID: "kwok://web-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	all := append([]client.Object{np, nc, node}, objs...)
	builder := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodeClaim{}, &corev1.Pod{}).WithObjects(all...).
		WithIndex(&corev1.Pod{}, termination.PodNodeNameIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} })
	store := builder.Build()
	kube := client.WithWatch(store)
	if funcs != nil {
		kube = interceptor.NewClient(store, *funcs)
	}
	clk := clocktesting.NewFakeClock(epoch)
	cluster := state.NewCluster(clk)
	cluster.MarkSynced()
	cluster.UpdateNodePool(np)
	cluster.UpdateNodeClaim(nc)
	cluster.UpdateNode(node)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			cluster.UpdatePod(p)
		}
	}
	return env{kube: kube, store: store, clock: clk, cluster: cluster}
}

func (e env) claim(t *testing.T) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := e.store.Get(context.Background(), client.ObjectKey{Name: "web-1"}, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: "web-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func TestClaimsRecordPodEventsAndConsolidatable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, boundPod("a"))
	c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
	e.clock.Step(30 * time.Second)
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	nc := e.claim(t)
	if !nc.Status.LastPodEventTime.Time.Equal(epoch.Add(30 * time.Second)) {
		t.Errorf("lastPodEventTime %v, want the first look at a pod on the node", nc.Status.LastPodEventTime)
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeConsolidatable); cond == nil || cond.Status != metav1.ConditionFalse || res.RequeueAfter != time.Minute {
		t.Errorf("Consolidatable %+v, requeue %s: want False until a minute after the pod event", cond, res.RequeueAfter)
	}
	// The pod leaves: a new pod event, and the minute starts again.
	if err := e.kube.Delete(ctx, boundPod("a")); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(50 * time.Second)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := e.claim(t).Status.LastPodEventTime.Time; !got.Equal(epoch.Add(80 * time.Second)) {
		t.Errorf("lastPodEventTime %v after the pod left, want %v", got, epoch.Add(80*time.Second))
	}
	e.clock.Step(time.Minute)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(e.claim(t).Status.Conditions, karpv1.ConditionTypeConsolidatable) {
		t.Error("not Consolidatable a minute after the last pod event")
	}
}

// Pod events closer together than the dedupe are one status write, as in
// Karpenter: a node filling with pods is not written once per pod.
func TestClaimsDedupePodEvents(t *testing.T) {
	ctx := context.Background()
	writes := 0
	e := newEnvWith(t, &interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
	bind := func(name string, after time.Duration) time.Time {
		t.Helper()
		e.clock.Step(after)
		if err := e.store.Create(ctx, boundPod(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		return e.claim(t).Status.LastPodEventTime.Time
	}
	first := bind("a", time.Minute)
	writes = 0
	for i, pod := range []string{"b", "c", "d"} {
		if got := bind(pod, 3*time.Second); !got.Equal(first) {
			t.Fatalf("pod %d of a burst moved lastPodEventTime to %v, want the first %v", i+2, got, first)
		}
	}
	if writes != 0 {
		t.Errorf("%d status writes for a burst of pod events within %s, want 0", writes, PodEventDedupe)
	}
	if got := bind("e", 2*time.Second); !got.Equal(e.clock.Now()) {
		t.Errorf("a pod event %s after the last one recorded: lastPodEventTime %v, want now %v", PodEventDedupe+2*time.Second, got, e.clock.Now())
	}
}

func TestClaimsExpire(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
	e.clock.Step(719 * time.Hour)
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if e.claim(t).DeletionTimestamp != nil || res.RequeueAfter > time.Hour {
		t.Fatalf("deleted early, or requeue %s past expiry", res.RequeueAfter)
	}
	e.clock.Step(time.Hour)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if e.claim(t).DeletionTimestamp == nil {
		t.Error("not deleted at expireAfter")
	}
}

// A decision waits for validation; a node that got a pod meanwhile stays.
func TestLoopValidatesBeforeActing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		podArrives  bool
		wantDeleted bool
	}{{"still empty: disrupted", false, true}, {"a pod arrived: kept", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			nc := e.claim(t)
			nc.Status.LastPodEventTime = metav1.NewTime(epoch)
			if err := e.kube.Status().Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
			e.cluster.UpdateNodeClaim(nc)
			l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(10), nil, logr.Discard(), nil, Options{})
			e.clock.Step(2 * time.Minute)
			wait, err := l.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if wait != DefaultValidation || e.claim(t).DeletionTimestamp != nil {
				t.Fatalf("first pass: wait %s, deleted %v: want a decision held for validation", wait, e.claim(t).DeletionTimestamp != nil)
			}
			if tc.podArrives {
				e.cluster.UpdatePod(boundPod("late"))
			}
			e.clock.Step(wait)
			next, err := l.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := e.claim(t)
			if deleted := got.DeletionTimestamp != nil; deleted != tc.wantDeleted {
				t.Fatalf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			// After a command the next pass comes at once, so the next
			// command does not wait a whole interval on top of its own
			// validation; after nothing, an interval.
			if want := map[bool]time.Duration{true: afterCommand, false: DefaultInterval}[tc.wantDeleted]; next != want {
				t.Errorf("next pass in %s, want %s", next, want)
			}
			if !tc.wantDeleted {
				return
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c == nil || c.Reason != string(karpv1.DisruptionReasonEmpty) {
				t.Errorf("DisruptionReason %+v, want Empty", c)
			}
			node := &corev1.Node{}
			_ = e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node)
			tainted := false
			for _, taint := range node.Spec.Taints {
				tainted = tainted || taint.MatchTaint(&karpv1.DisruptedNoScheduleTaint)
			}
			if !tainted {
				t.Errorf("node taints %v: want karpenter.sh/disrupted:NoSchedule", node.Spec.Taints)
			}
		})
	}
}

// A launched NodeClaim whose NodePool template changed is Drifted with
// the reason; once the pool matches again the condition goes.
func TestClaimsMarkDrift(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, boundPod("a"))
	nc := e.claim(t)
	nc.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: "1", karpv1.AnnotationNodePoolHashVersion: "v3"}
	if err := e.kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched"})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	setPoolHash := func(hash string) {
		np := &karpv1.NodePool{}
		if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			t.Fatal(err)
		}
		np.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: "v3"}
		if err := e.kube.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	c := NewClaims(e.kube, nil, e.cluster, e.clock, record.NewFakeRecorder(10), nil)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-1"}}
	setPoolHash("2")
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(e.claim(t).Status.Conditions, karpv1.ConditionTypeDrifted)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "NodePoolDrifted" {
		t.Fatalf("Drifted %+v, want True NodePoolDrifted", cond)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > DriftRecheck {
		t.Errorf("requeue %s: drift is looked at again within %s", res.RequeueAfter, DriftRecheck)
	}
	setPoolHash("1")
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(e.claim(t).Status.Conditions, karpv1.ConditionTypeDrifted); cond != nil {
		t.Errorf("Drifted %+v after the pool matches again, want no condition", cond)
	}
}

// A drifted empty node goes at once: drift is not held for validation.
func TestLoopActsOnDriftWithoutValidation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	e.cluster.UpdateNodePool(np)
	nc := e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	recorder := record.NewFakeRecorder(10)
	l := NewLoop(e.kube, e.cluster, e.clock, recorder, nil, logr.Discard(), nil, Options{})
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.claim(t)
	if got.DeletionTimestamp == nil {
		t.Fatal("the drifted node was not disrupted in the first pass")
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c == nil || c.Reason != string(karpv1.DisruptionReasonDrifted) {
		t.Errorf("DisruptionReason %+v, want Drifted", c)
	}
}

// A node consolidation cannot take says why, once, as an event.
func TestLoopExplainsWhyANodeStays(t *testing.T) {
	ctx := context.Background()
	pinned := boundPod("pinned")
	pinned.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	e := newEnv(t, pinned)
	recorder := record.NewFakeRecorder(10)
	l := NewLoop(e.kube, e.cluster, e.clock, recorder, nil, logr.Discard(), nil, Options{})
	for range 2 {
		e.clock.Step(2 * time.Minute)
		e.cluster.UpdatePod(pinned) // the model changes: the round is not skipped
		if _, err := l.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	// One on the NodeClaim and one on the node, not repeated next round.
	if len(events) != 2 || !strings.Contains(events[0], "DisruptionBlocked") || !strings.Contains(events[0], "pod default/pinned has karpenter.sh/do-not-disrupt") {
		t.Errorf("events %q, want DisruptionBlocked naming the pod, once per object", events)
	}
}

// A node held for a moment by a nomination (a pod binding to it) gets no
// event; once the nomination lapses (which changes no object) the lasting
// reason is published, not hidden behind the first for 15 minutes.
func TestLoopExplainsTheLastingReasonAfterANomination(t *testing.T) {
	ctx := context.Background()
	pinned := boundPod("pinned")
	pinned.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	e := newEnv(t, pinned)
	recorder := record.NewFakeRecorder(10)
	l := NewLoop(e.kube, e.cluster, e.clock, recorder, nil, logr.Discard(), nil, Options{})
	e.clock.Step(2 * time.Minute)
	e.cluster.Nominate([]*corev1.Pod{boundPod("arriving")}, "web-1", 20*time.Second)
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(recorder.Events) != 0 {
		t.Errorf("an event while the node is only nominated: %q", <-recorder.Events)
	}
	e.clock.Step(21 * time.Second) // the nomination lapses; the model is unchanged
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if len(events) != 2 || !strings.Contains(events[0], "pod default/pinned has karpenter.sh/do-not-disrupt") {
		t.Errorf("events %q, want DisruptionBlocked naming the pinned pod on the NodeClaim and the node", events)
	}
}

// fixedPools hands the loop the same pools every time.
type fixedPools struct{ pools []sched.NodePool }

func (f fixedPools) Pools(context.Context, state.Snapshot) ([]sched.NodePool, map[string]*karpv1.NodePool, error) {
	return f.pools, nil, nil
}

// A replacement that does not initialize in time is given up: the node is
// untainted, its DisruptionReason cleared, the replacement deleted.
func TestLoopRollsBackAReplacementThatNeverInitializes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, boundPod("a"))
	nc := e.claim(t)
	nc.Labels[corev1.LabelInstanceTypeStable] = "m-1"
	if err := e.kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	types, err := catalog.Parse("test", []byte(`[{"name": "m-1", "architecture": "amd64", "operatingSystems": ["linux"],
	  "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	pools := fixedPools{[]sched.NodePool{{NodePool: np, InstanceTypes: []*catalog.InstanceType{&types[0]}}}}
	l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(10), nil, logr.Discard(), pools, Options{ReplacementTimeout: time.Minute})
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	var claims karpv1.NodeClaimList
	if err := e.kube.List(ctx, &claims); err != nil || len(claims.Items) != 2 {
		t.Fatalf("nodeclaims %d (%v): want the drifted one and its replacement", len(claims.Items), err)
	}
	if c := meta.FindStatusCondition(e.claim(t).Status.Conditions, karpv1.ConditionTypeDisruptionReason); c == nil || c.Reason != string(karpv1.DisruptionReasonDrifted) {
		t.Fatalf("DisruptionReason %+v while the replacement launches, want Drifted", c)
	}
	if !tainted(ctx, t, e.kube) {
		t.Fatal("the drifted node is not tainted while its replacement launches")
	}
	e.clock.Step(2 * time.Minute)
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.claim(t); got.DeletionTimestamp != nil || meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil {
		t.Errorf("after the timeout: deleting %v, conditions %+v: want the node kept and its DisruptionReason cleared", got.DeletionTimestamp != nil, got.Status.Conditions)
	}
	if tainted(ctx, t, e.kube) {
		t.Error("after the timeout the node is still tainted")
	}
	if err := e.kube.List(ctx, &claims); err != nil || len(claims.Items) != 1 {
		t.Errorf("nodeclaims %d (%v) after the timeout: want the replacement deleted", len(claims.Items), err)
	}
}

func tainted(ctx context.Context, t *testing.T, kube client.Client) bool {
	t.Helper()
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}
