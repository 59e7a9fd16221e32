package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/sched"
)

func appPod(name, app string, ready bool) *corev1.Pod {
	p := podOf(name, "ReplicaSet", nil)
	p.Labels = map[string]string{"app": app}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func budgetFor(name, app string, mutate func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	mutate(pdb)
	return pdb
}

func TestPDBsBlocking(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	half := intstr.FromString("50%")
	web := []*corev1.Pod{appPod("web-1", "web", true), appPod("web-2", "web", true)}
	cases := []struct {
		name  string
		pdbs  []*policyv1.PodDisruptionBudget
		pods  []*corev1.Pod
		probe *corev1.Pod
		want  string // part of the reason; "" for allowed
	}{
		{"no budget", nil, web, web[0], ""},
		{"maxUnavailable 1 of 2 ready: allowed", []*policyv1.PodDisruptionBudget{budgetFor("web", "web", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &one })}, web, web[0], ""},
		{"maxUnavailable 0 blocks", []*policyv1.PodDisruptionBudget{budgetFor("web", "web", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &zero })}, web, web[0], "PodDisruptionBudget default/web allows 0 disruptions"},
		{"minAvailable 50% of 2 with one not ready blocks", []*policyv1.PodDisruptionBudget{budgetFor("web", "web", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = &half })},
			[]*corev1.Pod{appPod("web-1", "web", true), appPod("web-2", "web", false)}, web[0], "allows 0"},
		{"observed status wins over the pods", []*policyv1.PodDisruptionBudget{budgetFor("web", "web", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MaxUnavailable = &one
			p.Status.ObservedGeneration, p.Status.DisruptionsAllowed = 1, 0
		})}, web, web[0], "allows 0"},
		{"AlwaysAllow lets a not-ready pod go", []*policyv1.PodDisruptionBudget{budgetFor("web", "web", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MaxUnavailable = &zero
			policy := policyv1.AlwaysAllow
			p.Spec.UnhealthyPodEvictionPolicy = &policy
		})}, web, appPod("web-3", "web", false), ""},
		{"two budgets over one pod block", []*policyv1.PodDisruptionBudget{
			budgetFor("a", "web", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &one }),
			budgetFor("b", "web", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &one }),
		}, web, web[0], "more than one PodDisruptionBudget (a, b)"},
		{"an empty selector covers every pod of the namespace", []*policyv1.PodDisruptionBudget{budgetFor("all", "web", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector = &metav1.LabelSelector{}
			p.Spec.MaxUnavailable = &zero
		})}, web, web[0], "PodDisruptionBudget default/all allows 0"},
		{"no selector covers nothing", []*policyv1.PodDisruptionBudget{budgetFor("none", "web", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector = nil
			p.Spec.MaxUnavailable = &zero
		})}, web, web[0], ""},
		{"another app's budget does not count", []*policyv1.PodDisruptionBudget{budgetFor("api", "api", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &zero })}, web, web[0], ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NewPDBs(tc.pdbs, tc.pods).Blocking(tc.probe)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("Blocking = %q, want %q", got, tc.want)
			}
		})
	}
}

// A PDB allowing no disruption keeps consolidation off the node.
func TestUnderutilizedRespectsPDBs(t *testing.T) {
	zero := intstr.FromInt32(0)
	np := underutilizedPool("100%")
	guarded := appPod("guarded-1", "guarded", true)
	guarded.Spec.Containers = cpuPod("x", "1").Spec.Containers
	a, b := candidate("a", np, time.Hour, guarded), candidate("b", np, time.Hour)
	pdbs := NewPDBs([]*policyv1.PodDisruptionBudget{budgetFor("guarded", "guarded", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &zero })}, []*corev1.Pod{guarded})
	a.PDBs, b.PDBs = pdbs, pdbs
	d, err := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, nil, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if names(d.Command.Candidates) != "b" || !strings.Contains(d.Stays["a"], "PodDisruptionBudget default/guarded allows 0") {
		t.Errorf("takes %q, stays %v: want only the empty b, a held by the PDB", names(d.Command.Candidates), d.Stays)
	}
}
