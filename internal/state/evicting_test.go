package state

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

func TestEvictingPods(t *testing.T) {
	yes := true
	deleting := metav1.NewTime(epoch)
	cases := []struct {
		name      string
		node      func(*corev1.Node)
		claim     func(*karpv1.NodeClaim)
		pod       func(*corev1.Pod)
		wantMoves bool
	}{
		{name: "node being deleted", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting }, wantMoves: true},
		{name: "NodeClaim being deleted", claim: func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = &deleting }, wantMoves: true},
		{name: "tainted by disruption", node: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint} }, wantMoves: true},
		{name: "terminating StatefulSet pod on a deleting node", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting },
			pod: func(p *corev1.Pod) {
				p.DeletionTimestamp = &deleting
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: &yes}}
			}, wantMoves: true},
		{name: "terminating ReplicaSet pod (its replacement is pending already)", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting },
			pod: func(p *corev1.Pod) {
				p.DeletionTimestamp = &deleting
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
			}},
		{name: "cordoned only", node: func(n *corev1.Node) { n.Spec.Unschedulable = true }},
		{name: "healthy node"},
		{name: "DaemonSet pod", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting },
			pod: func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: &yes}}
			}},
		{name: "pod tolerating the disrupted taint", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting },
			pod: func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists}}
			}},
		{name: "finished pod", node: func(n *corev1.Node) { n.DeletionTimestamp = &deleting },
			pod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster(clocktesting.NewFakeClock(epoch))
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.LabelNodePool: "default"}},
				Spec: corev1.NodeSpec{ProviderID: "fake://1"}}
			claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", Labels: map[string]string{karpv1.LabelNodePool: "default"}},
				Status: karpv1.NodeClaimStatus{ProviderID: "fake://1"}}
			pod := unschedulable("web")
			pod.Spec.NodeName, pod.Status = "n1", corev1.PodStatus{Phase: corev1.PodRunning}
			if tc.node != nil {
				tc.node(node)
			}
			if tc.claim != nil {
				tc.claim(claim)
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			c.UpdateNode(node)
			c.UpdateNodeClaim(claim)
			c.UpdatePod(pod)
			snap := c.Snapshot()
			if got := len(snap.Evicting) == 1; got != tc.wantMoves {
				t.Fatalf("evicting %d pods, want moves=%v", len(snap.Evicting), tc.wantMoves)
			}
			if got := c.AnyProvisionable(); got != tc.wantMoves {
				t.Errorf("AnyProvisionable = %v, want %v", got, tc.wantMoves)
			}
			in := snap.ProvisioningInput(nil)
			if tc.wantMoves {
				if len(in.Pods) != 1 || in.Pods[0].Spec.NodeName != "" {
					t.Fatalf("provisioning pods %v, want the evicting pod unbound", in.Pods)
				}
				if pod.Spec.NodeName != "n1" {
					t.Error("the model's pod was modified")
				}
				for _, n := range in.Nodes {
					if len(n.Pods) != 0 {
						t.Errorf("node %s still holds %d pods: the moving pod would count twice", n.Name, len(n.Pods))
					}
				}
			}

			// Planned somewhere, it holds that room and is not solved for
			// again until the nomination lapses.
			c.Nominate([]*corev1.Pod{pod}, "n2", 20*time.Second)
			snap = c.Snapshot()
			if len(snap.Evicting) != 0 || c.AnyProvisionable() {
				t.Errorf("a nominated evicting pod is solved for again")
			}
		})
	}
}

// A nominated evicting pod holds its room at the target: a pending pod
// arriving later does not get it.
func TestEvictingPodHoldsItsNewRoom(t *testing.T) {
	deleting := metav1.NewTime(epoch)
	c := NewCluster(clocktesting.NewFakeClock(epoch))
	oneCPU := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &deleting, Finalizers: []string{"x"}},
		Status: corev1.NodeStatus{Allocatable: oneCPU}}
	spare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "spare"}, Status: corev1.NodeStatus{Allocatable: oneCPU}}
	moving := unschedulable("a")
	moving.Spec.NodeName, moving.Status = "old", corev1.PodStatus{Phase: corev1.PodRunning}
	c.UpdateNode(old)
	c.UpdateNode(spare)
	c.UpdatePod(moving)
	c.Nominate([]*corev1.Pod{moving}, "spare", 20*time.Second)
	c.UpdatePod(unschedulable("b"))

	in := c.Snapshot().ProvisioningInput(nil)
	plan := sched.Solve(in)
	for _, e := range plan.Existing {
		for _, p := range e.Pods {
			if p.Name == "b" {
				t.Errorf("pending pod b placed on %s, whose room the evicting pod a holds", e.Node)
			}
		}
	}
	for _, n := range in.Nodes {
		if n.Name == "spare" && (len(n.Pods) != 1 || n.Pods[0].Name != "a") {
			t.Errorf("spare holds %v, want the evicting pod a", n.Pods)
		}
		if n.Name == "old" && len(n.Pods) != 0 {
			t.Errorf("old still counts %d pods", len(n.Pods))
		}
	}
}
