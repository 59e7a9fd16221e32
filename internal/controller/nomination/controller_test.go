package nomination

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

func pending(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func startingClaim(mutate ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-abc12"}, Status: karpv1.NodeClaimStatus{NodeName: "node-1"}}
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue}}
	for _, m := range mutate {
		m(nc)
	}
	return nc
}

func setup(t *testing.T, nc *karpv1.NodeClaim, planned []*corev1.Pod, others ...client.Object) (*Controller, client.Client, *clocktesting.FakeClock) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := karpv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	objs := append([]client.Object{nc}, others...)
	for _, p := range planned {
		objs = append(objs, p)
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&corev1.Pod{}, &karpv1.NodeClaim{}).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, PodNominatedNodeIndex, func(o client.Object) []string {
			if n := o.(*corev1.Pod).Status.NominatedNodeName; n != "" {
				return []string{n}
			}
			return nil
		}).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	cluster := state.NewCluster(clk)
	cluster.Nominate(planned, nc.Name, time.Minute)
	return New(kube, cluster, 4, logr.Discard()), kube, clk
}

func nominatedNode(t *testing.T, kube client.Client, name string) string {
	t.Helper()
	p := &corev1.Pod{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p.Status.NominatedNodeName
}

func TestReconcileHandsThePlanToKubeScheduler(t *testing.T) {
	bound := pending("bound", func(p *corev1.Pod) { p.Spec.NodeName = "elsewhere" })
	preempting := pending("preempting", func(p *corev1.Pod) { p.Status.NominatedNodeName = "victim-node" })
	done := pending("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	cases := []struct {
		name  string
		claim *karpv1.NodeClaim
		want  map[string]string // pod -> nominatedNodeName after reconcile
	}{
		{"registered, starting: planned pods wait for its node", startingClaim(),
			map[string]string{"a": "node-1", "b": "node-1", "bound": "", "preempting": "victim-node", "done": ""}},
		{"initialized: the plan holds while its nomination does",
			startingClaim(func(nc *karpv1.NodeClaim) {
				nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue})
			}),
			map[string]string{"a": "node-1", "b": "node-1", "preempting": "victim-node"}},
		{"not registered: no node to name", startingClaim(func(nc *karpv1.NodeClaim) { nc.Status.NodeName = "" }),
			map[string]string{"a": "", "b": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			planned := []*corev1.Pod{pending("a"), pending("b"), bound.DeepCopy(), preempting.DeepCopy(), done.DeepCopy()}
			c, kube, _ := setup(t, tc.claim, planned)
			if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc.claim)}); err != nil {
				t.Fatal(err)
			}
			for pod, want := range tc.want {
				if got := nominatedNode(t, kube, pod); got != want {
					t.Errorf("pod %s nominated to %q, want %q", pod, got, want)
				}
			}
		})
	}
}

// kube-scheduler clears a pod's nomination each time an attempt fails; the
// next reconcile sets it again while the node starts.
func TestHintIsRestoredAfterKubeSchedulerClearsIt(t *testing.T) {
	nc := startingClaim()
	c, kube, clk := setup(t, nc, []*corev1.Pod{pending("a")})
	ctx := context.Background()
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}
	clearHint := func() {
		p := &corev1.Pod{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, p); err != nil {
			t.Fatal(err)
		}
		p.Status.NominatedNodeName = ""
		if err := kube.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	clearHint()
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := nominatedNode(t, kube, "a"); got != "node-1" {
		t.Errorf("pod a nominated to %q after kube-scheduler cleared it, want node-1", got)
	}

	// Once the nomination lapses the hint is withdrawn (kube-scheduler may
	// not try the pod again for minutes, and a nominated pod is not
	// provisionable): the pod is the next provisioning decision's again.
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter == 0 {
		t.Error("no recheck while a hint is out")
	}
	clk.Step(2 * time.Minute)
	if _, err := c.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := nominatedNode(t, kube, "a"); got != "" {
		t.Errorf("pod a still nominated to %q after its nomination lapsed, want none", got)
	}
	if res, _ := c.Reconcile(ctx, req); res.RequeueAfter != 0 {
		t.Error("still rechecking with no hint out")
	}
}

// A deleted NodeClaim's node will not take the pods: their hints go, so
// they are provisionable again now rather than after kube-scheduler's
// five-minute flush. Other nominations stay.
func TestDeletedClaimClearsItsHints(t *testing.T) {
	nc := startingClaim(func(nc *karpv1.NodeClaim) {
		nc.Finalizers = []string{karpv1.TerminationFinalizer}
	})
	waiting := pending("a", func(p *corev1.Pod) { p.Status.NominatedNodeName = "node-1" })
	elsewhere := pending("b", func(p *corev1.Pod) { p.Status.NominatedNodeName = "node-2" })
	c, kube, _ := setup(t, nc, nil, waiting, elsewhere)
	ctx := context.Background()
	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	if got := nominatedNode(t, kube, "a"); got != "" {
		t.Errorf("pod a still nominated to %q, the deleted claim's node", got)
	}
	if got := nominatedNode(t, kube, "b"); got != "node-2" {
		t.Errorf("pod b nominated to %q, want node-2 untouched", got)
	}
}

func TestDecide(t *testing.T) {
	deleting := metav1.Now()
	cases := []struct {
		name        string
		pod         *corev1.Pod
		hint, stale bool
	}{
		{"pending", pending("p"), true, false},
		{"nominated here", pending("p", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }), false, true},
		{"bound", pending("p", func(p *corev1.Pod) { p.Spec.NodeName = "n" }), false, false},
		{"terminating", pending("p", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }), false, false},
		{"failed", pending("p", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false, false},
		// kube-scheduler counts a node's nominated pods against the spread:
		// hinting many spread pods to one node blocks them all.
		{"spread over zones", pending("p", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}}
		}), false, false},
		{"spread over zones, scored only", pending("p", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway}}
		}), true, false},
		{"spread over zones and hosts, one hard", pending("p", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway},
				{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule},
			}
		}), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := wantsHint(tc.pod, "n"); got != tc.hint {
				t.Errorf("wantsHint = %v, want %v", got, tc.hint)
			}
			if got := staleHint(tc.pod, "n"); got != tc.stale {
				t.Errorf("staleHint = %v, want %v", got, tc.stale)
			}
		})
	}
}
