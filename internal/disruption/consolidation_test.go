package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

func cpuPod(name, cpu string) *corev1.Pod {
	p := podOf(name, "ReplicaSet", nil)
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	return p
}

func underutilizedPool(budget string) *karpv1.NodePool {
	np := pool(karpv1.Budget{Nodes: budget})
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	return np
}

// schedNode is the solver's view of a candidate's node: 4 CPUs.
func schedNode(c Candidate) sched.Node {
	return sched.Node{Name: c.Node.Name, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
		Pods: c.Pods, NodePool: c.NodePool.Name, Initialized: true, Labels: map[string]string{corev1.LabelHostname: c.Node.Name}}
}

func TestUnderutilized(t *testing.T) {
	np := underutilizedPool("100%")
	light := candidate("a-light", np, time.Hour, cpuPod("a1", "1"))
	half := candidate("b-half", np, time.Hour, cpuPod("b1", "1"), cpuPod("b2", "1"))
	full := candidate("c-full", np, time.Hour, cpuPod("c1", "2"), cpuPod("c2", "1500m"))
	cands := []Candidate{full, half, light}
	cluster := []sched.Node{schedNode(light), schedNode(half), schedNode(full)}
	d, err := Underutilized(cands, cluster, sched.Input{}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	// a's pod fits on b; then b's two and a's one (3 CPUs) do not fit in
	// c's half CPU left, and c's pods never fit anywhere else.
	if got := names(d.Command.Candidates); got != "a-light" {
		t.Errorf("consolidation takes %q, want a-light only", got)
	}
	for _, name := range []string{"b-half", "c-full"} {
		if !strings.Contains(d.Stays[name], "would have no place on the other nodes") {
			t.Errorf("%s stays because %q", name, d.Stays[name])
		}
	}
}

func TestUnderutilizedRespectsPolicyBudgetAndStartingNodes(t *testing.T) {
	t.Run("WhenEmpty keeps busy nodes", func(t *testing.T) {
		np := underutilizedPool("100%")
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		d, _ := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "WhenEmpty") {
			t.Errorf("takes %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("budget of zero", func(t *testing.T) {
		np := underutilizedPool("0")
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		d, _ := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "budget") {
			t.Errorf("takes %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("pods are not moved onto nodes still starting", func(t *testing.T) {
		np := underutilizedPool("100%")
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		starting := schedNode(b)
		starting.Initialized = false
		d, _ := Underutilized([]Candidate{a}, []sched.Node{schedNode(a), starting}, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 {
			t.Errorf("takes %q: a's pod would wait for b to start", names(d.Command.Candidates))
		}
	})
}
