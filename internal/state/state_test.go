package state

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

var epoch = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func unschedulable(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

func TestProvisionable(t *testing.T) {
	yes := true
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   bool
	}{
		{"marked Unschedulable by kube-scheduler", func(*corev1.Pod) {}, true},
		{"not yet looked at by kube-scheduler", func(p *corev1.Pod) { p.Status.Conditions = nil }, false},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n" }, false},
		{"nominated by kube-scheduler (preempting)", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }, false},
		{"a DaemonSet pod", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: &yes}}
		}, false},
		{"a mirror pod", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n", Controller: &yes}}
		}, false},
		{"owned by a ReplicaSet", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
		}, true},
		{"terminating", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, false},
		{"finished", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
	}
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := unschedulable("p")
			tc.mutate(p)
			if got := c.Provisionable(p); got != tc.want {
				t.Errorf("Provisionable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNominationsExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	c := NewCluster(clk)
	a, b := unschedulable("a"), unschedulable("b")
	c.UpdatePod(a)
	c.UpdatePod(b)
	c.Nominate([]*corev1.Pod{a}, "web-1", 20*time.Second)
	if got := names(c.Snapshot().Pending); got != "b" || c.Provisionable(a) {
		t.Errorf("pending %q just after nominating a; want only b", got)
	}
	clk.Step(21 * time.Second)
	if got := names(c.Snapshot().Pending); got != "a,b" || !c.Provisionable(a) {
		t.Errorf("pending %q after the nomination expired; want a,b", got)
	}
	c.DeletePod("default", "a")
	if got := names(c.Snapshot().Pending); got != "b" {
		t.Errorf("pending %q after deleting a", got)
	}
}

func names(pods []*corev1.Pod) string {
	out := ""
	for i, p := range pods {
		if i > 0 {
			out += ","
		}
		out += p.Name
	}
	return out
}

func capacity(cpu string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}
}

func claim(name, pool, providerID string, launched bool) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}}}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}
	if launched {
		nc.Status.ProviderID = providerID
		nc.Status.Capacity, nc.Status.Allocatable = capacity("4"), capacity("4")
	}
	return nc
}

func TestSnapshotPairsClaimsAndNodes(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	registered := claim("registered", "default", "kwok://registered", true)
	registered.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	c.UpdateNodeClaim(registered)
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "registered", Labels: map[string]string{karpv1.LabelNodePool: "default"}},
		Spec: corev1.NodeSpec{ProviderID: "kwok://registered"}, Status: corev1.NodeStatus{Capacity: capacity("4"), Allocatable: capacity("3")}})
	c.UpdateNodeClaim(claim("launched", "default", "kwok://launched", true))
	c.UpdateNodeClaim(claim("launching", "default", "", false))
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "byo"}, Status: corev1.NodeStatus{Capacity: capacity("2"), Allocatable: capacity("2")}})
	running := unschedulable("running")
	running.Spec.NodeName = "registered"
	done := unschedulable("done")
	done.Spec.NodeName, done.Status.Phase = "registered", corev1.PodSucceeded
	c.UpdatePod(running)
	c.UpdatePod(done)
	c.UpdatePod(unschedulable("waiting"))
	c.UpdateNodePool(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	c.UpdateDaemonSet(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}})

	snap := c.Snapshot()
	byName := map[string]sched.Node{}
	for _, n := range snap.Nodes {
		byName[n.Name] = n
	}
	if n := byName["registered"]; n.InFlight || !n.Initialized || n.NodePool != "default" || len(n.Pods) != 1 || n.Pods[0].Name != "running" || n.Allocatable.Cpu().String() != "3" {
		t.Errorf("registered node: %+v", n)
	}
	if n := byName["launched"]; !n.InFlight || n.Labels[corev1.LabelTopologyZone] != "zone-a" || n.Allocatable.Cpu().String() != "4" {
		t.Errorf("launched NodeClaim without a node: %+v", n)
	}
	if n, ok := byName["byo"]; !ok || !n.Initialized || n.NodePool != "" {
		t.Errorf("unmanaged node: %+v", n)
	}
	if _, ok := byName["launching"]; ok || len(snap.Launching["default"]) != 1 {
		t.Errorf("a NodeClaim not launched yet is capacity of unknown size: nodes %v, launching %v", byName["launching"], snap.Launching)
	}
	usage := snap.Usage["default"]
	if cpu, nodes := usage[corev1.ResourceCPU], usage["nodes"]; cpu.String() != "8" || nodes.String() != "2" {
		t.Errorf("default pool usage %v, want cpu 8 (4 registered + 4 launched), nodes 2", usage)
	}
	if names(snap.Pending) != "waiting" || len(snap.NodePools) != 1 || len(snap.DaemonSetPods) != 1 {
		t.Errorf("pending %q, %d pools, %d daemon pods", names(snap.Pending), len(snap.NodePools), len(snap.DaemonSetPods))
	}

	// The solver, fed the snapshot, uses the room the nodes have first.
	types, err := catalog.Parse("t", []byte(`[{"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "4Gi"},
		"offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	plan := sched.Solve(snap.Input([]sched.NodePool{{NodePool: snap.NodePools[0], InstanceTypes: []*catalog.InstanceType{&types[0]}, Usage: usage}}))
	if len(plan.NodeClaims) != 0 || len(plan.Existing) != 1 {
		t.Errorf("the waiting pod should go to existing room: %+v", plan)
	}
}

func TestDeletingAndDisruptedNodesTakeNoPods(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "draining"},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{karpv1.DisruptedNoScheduleTaint}},
		Status: corev1.NodeStatus{Allocatable: capacity("4")}})
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Allocatable: capacity("4")}})
	for _, n := range c.Snapshot().Nodes {
		if !n.MarkedForDeletion {
			t.Errorf("node %s takes new pods", n.Name)
		}
	}
}

func TestDeletingTheTargetClaimEndsNominations(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	a, b := unschedulable("a"), unschedulable("b")
	c.UpdatePod(a)
	c.UpdatePod(b)
	c.Nominate([]*corev1.Pod{a}, "web-1", time.Minute)
	c.Nominate([]*corev1.Pod{b}, "web-2", time.Minute)
	c.DeleteNodeClaim("web-1") // say, refused for insufficient capacity
	if got := names(c.Snapshot().Pending); got != "a" {
		t.Errorf("pending %q: a's claim is gone, so a needs a place again; b's still holds", got)
	}
}

// A nominated pod holds its room on the claim it was planned onto, before
// and after the claim's node registers (under a different name).
func TestNominatedPodsHoldTheirRoom(t *testing.T) {
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	inflight := claim("web-1", "default", "kwok://i-1", true)
	registered := claim("web-2", "default", "kwok://i-2", true)
	c.UpdateNodeClaim(inflight)
	c.UpdateNodeClaim(registered)
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-2"}, Spec: corev1.NodeSpec{ProviderID: "kwok://i-2"},
		Status: corev1.NodeStatus{Allocatable: capacity("4")}})
	a, b, waiting := unschedulable("a"), unschedulable("b"), unschedulable("waiting")
	for _, p := range []*corev1.Pod{a, b, waiting} {
		c.UpdatePod(p)
	}
	c.Nominate([]*corev1.Pod{a}, "web-1", time.Minute)
	c.Nominate([]*corev1.Pod{b}, "web-2", time.Minute)

	snap := c.Snapshot()
	got := map[string]string{}
	for _, n := range snap.Nodes {
		got[n.Name] = names(n.Pods)
	}
	if got["web-1"] != "a" || got["ip-10-0-0-2"] != "b" {
		t.Errorf("pods per node %v: want a on the in-flight claim web-1, b on web-2's node", got)
	}
	if names(snap.Pending) != "waiting" {
		t.Errorf("pending %q", names(snap.Pending))
	}
}

// A pending pod whose status names a node (kube-scheduler's preemption, or
// a plan handed over to it) holds its room on that node, as kube-scheduler's
// nominator does, even after Nodewright's own nomination lapsed.
func TestNominatedNodeNameHoldsRoom(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	c := NewCluster(clk)
	c.UpdateNodeClaim(claim("web-1", "default", "kwok://i-1", true))
	c.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://i-1"},
		Status: corev1.NodeStatus{Allocatable: capacity("4")}})
	a := unschedulable("a")
	c.UpdatePod(a)
	c.Nominate([]*corev1.Pod{a}, "web-1", time.Minute)
	if got := c.NominatedTo("web-1"); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("NominatedTo(web-1) = %v, want [default/a]", got)
	}
	if got := c.NominationOf("default", "a"); got != "web-1" {
		t.Fatalf("NominationOf(a) = %q, want web-1", got)
	}
	handed := a.DeepCopy()
	handed.Status.NominatedNodeName = "ip-10-0-0-1"
	c.UpdatePod(handed)
	clk.Step(2 * time.Minute) // Nodewright's nomination lapses
	if got := c.NominatedTo("web-1"); len(got) != 0 {
		t.Errorf("NominatedTo(web-1) = %v after the nomination expired, want none", got)
	}
	snap := c.Snapshot()
	if len(snap.Pending) != 0 {
		t.Errorf("pending %q: a pod nominated to a node is not provisionable", names(snap.Pending))
	}
	if len(snap.Nodes) != 1 || names(snap.Nodes[0].Pods) != "a" {
		t.Errorf("nodes %+v: want a holding its room on ip-10-0-0-1", snap.Nodes)
	}
}
