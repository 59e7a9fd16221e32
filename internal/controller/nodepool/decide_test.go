package nodepool

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func pool(mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*karpv1.NodePool)
		want   string // "" valid
	}{
		{"valid", func(*karpv1.NodePool) {}, ""},
		{"label key not qualified", func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"bad key": "x"} }, `label key "bad key"`},
		{"duplicate taint across taints and startupTaints", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
		}, "taint a:NoSchedule appears twice"},
		{"no known capacity type", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"preemptible"}}}
		}, "admits no known capacity type"},
		{"an unknown capacity type beside a known one is fine", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"preemptible", "spot"}}}
		}, ""},
	}
	for _, c := range cases {
		got := Validate(pool(c.mutate))
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Validate = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestConditions(t *testing.T) {
	status := func(conds []metav1.Condition, typ string) string {
		for _, c := range conds {
			if c.Type == typ {
				return string(c.Status) + "/" + c.Reason
			}
		}
		return "-"
	}
	cases := []struct {
		name      string
		class     NodeClassState
		want      string // Ready
		wantClass string // NodeClassReady
	}{
		{"ready class", NodeClassState{Found: true}, "True/Ready", "True/NodeClassReady"},
		{"missing class", NodeClassState{}, "False/NodeClassNotFound", "False/NodeClassNotFound"},
		{"class being deleted", NodeClassState{Found: true, Deleting: true}, "False/NodeClassTerminating", "False/NodeClassTerminating"},
		{"class not ready", NodeClassState{Found: true, Ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "SubnetsNotFound"}}, "False/SubnetsNotFound", "False/SubnetsNotFound"},
		{"class readiness unknown", NodeClassState{Found: true, Ready: &metav1.Condition{Status: metav1.ConditionUnknown}}, "Unknown/NodeClassReadinessUnknown", "Unknown/NodeClassReadinessUnknown"},
	}
	for _, c := range cases {
		conds := Conditions(pool(), c.class)
		if got := status(conds, "Ready"); got != c.want {
			t.Errorf("%s: Ready %s, want %s", c.name, got, c.want)
		}
		if got := status(conds, "NodeClassReady"); got != c.wantClass {
			t.Errorf("%s: NodeClassReady %s, want %s", c.name, got, c.wantClass)
		}
	}
	invalid := pool(func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"bad key": "x"} })
	if got := status(Conditions(invalid, NodeClassState{Found: true}), "Ready"); got != "False/NodePoolValidationFailed" {
		t.Errorf("invalid pool: Ready %s", got)
	}
}
