package state

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// A pod's nomination ends when kube-scheduler reports it unschedulable
// while its planned node is up, and only then.
func TestRejectionByAnUpNodeEndsTheNomination(t *testing.T) {
	readyNode := func(taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://i-1", Taints: taints},
			Status: corev1.NodeStatus{Allocatable: capacity("4"), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}
	rejected := func(p *corev1.Pod) { p.Status.Conditions[0].Message = "0/1 nodes are available: 1 Insufficient cpu." }
	cases := []struct {
		name string
		// node is the planned node as it is when the report comes (nil:
		// none registered).
		node   *corev1.Node
		target string // the nomination's target: the claim, or the node
		pod    func(*corev1.Pod)
		report func(*corev1.Pod)
		want   bool // provisionable again
	}{
		{"rejected by the claim's up node", readyNode(), "web-1", nil, rejected, true},
		{"rejected by the planned existing node", readyNode(), "ip-1", nil, rejected, true},
		{"no node yet", nil, "web-1", nil, rejected, false},
		{"node not Ready", func() *corev1.Node {
			n := readyNode()
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			return n
		}(), "web-1", nil, rejected, false},
		{"node still tainted unregistered", readyNode(karpv1.UnregisteredNoExecuteTaint), "web-1", nil, rejected, false},
		{"node cordoned", func() *corev1.Node { n := readyNode(); n.Spec.Unschedulable = true; return n }(), "web-1", nil, rejected, false},
		{"a taint the pod tolerates", readyNode(dedicated), "web-1", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, rejected, true},
		{"a taint the pod does not tolerate", readyNode(dedicated), "web-1", nil, rejected, false},
		{"an update with no new report", readyNode(), "web-1", nil, func(p *corev1.Pod) { p.Labels = map[string]string{"x": "y"} }, false},
		{"scheduled since", readyNode(), "web-1", nil, func(p *corev1.Pod) {
			p.Status.Conditions[0].Status, p.Status.Conditions[0].Reason = corev1.ConditionTrue, ""
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(epoch)
			c := NewCluster(clk)
			nc := claim("web-1", "default", "kwok://i-1", true)
			c.UpdateNodeClaim(nc)
			pod := unschedulable("a")
			pod.Status.Conditions[0].Message = "no nodes available to schedule pods"
			if tc.pod != nil {
				tc.pod(pod)
			}
			c.UpdatePod(pod)
			c.Nominate([]*corev1.Pod{pod}, tc.target, time.Minute)
			if tc.node != nil {
				c.UpdateNode(tc.node)
			}
			clk.Step(time.Second)
			report := pod.DeepCopy()
			tc.report(report)
			c.UpdatePod(report)
			if got := c.Provisionable(report); got != tc.want {
				t.Errorf("provisionable after the report: %v, want %v (nomination %q)", got, tc.want, c.NominationOf("default", "a"))
			}
		})
	}
}
