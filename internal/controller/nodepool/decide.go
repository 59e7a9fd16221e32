package nodepool

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
)

// Validate runs the checks Karpenter makes at runtime on a NodePool beyond
// the CRD's schema: label keys and values, no duplicate taint key and effect
// across taints and startup taints, requirements that parse, and known
// values for capacity types. It returns "" when the pool is valid.
func Validate(np *karpv1.NodePool) string {
	tmpl := np.Spec.Template
	for k, v := range tmpl.ObjectMeta.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Sprintf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Sprintf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	var seen []corev1.Taint
	for _, t := range append(slices.Clone(tmpl.Spec.Taints), tmpl.Spec.StartupTaints...) {
		if slices.ContainsFunc(seen, func(s corev1.Taint) bool { return s.Key == t.Key && s.Effect == t.Effect }) {
			return fmt.Sprintf("taint %s:%s appears twice across taints and startupTaints", t.Key, t.Effect)
		}
		seen = append(seen, t)
	}
	reqs, err := requirement.FromAPI(tmpl.Spec.Requirements)
	if err != nil {
		return err.Error()
	}
	if r, ok := reqs.Get(karpv1.LabelCapacityType); ok {
		known := []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot, karpv1.CapacityTypeReserved}
		valid := 0
		for _, ct := range known {
			if r.Has(ct) {
				valid++
			}
		}
		if n, ok := r.MinValues(); valid == 0 || (ok && valid < n) {
			return fmt.Sprintf("requirement %s admits no known capacity type (%s)", r, strings.Join(known, ", "))
		}
	}
	return ""
}

// NodeClassState is what the NodePool's NodeClass looks like.
type NodeClassState struct {
	Found, Deleting bool
	// Ready is the NodeClass's Ready condition, nil when it has none.
	Ready *metav1.Condition
}

// Conditions computes the NodePool's conditions.
func Conditions(np *karpv1.NodePool, nodeClass NodeClassState) []metav1.Condition {
	cond := func(t string, s metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: message, ObservedGeneration: np.Generation}
	}
	var out []metav1.Condition
	valid := Validate(np)
	if valid == "" {
		out = append(out, cond(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, karpv1.ConditionTypeValidationSucceeded, ""))
	} else {
		out = append(out, cond(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "NodePoolValidationFailed", valid))
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	var classReady metav1.Condition
	switch {
	case !nodeClass.Found:
		classReady = cond(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, "NodeClassNotFound", fmt.Sprintf("%s %s not found", ref.Kind, ref.Name))
	case nodeClass.Deleting:
		classReady = cond(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, "NodeClassTerminating", fmt.Sprintf("%s %s is being deleted", ref.Kind, ref.Name))
	case nodeClass.Ready != nil && nodeClass.Ready.Status == metav1.ConditionFalse:
		classReady = cond(karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse, nodeClass.Ready.Reason, nodeClass.Ready.Message)
	case nodeClass.Ready != nil && nodeClass.Ready.Status == metav1.ConditionUnknown:
		classReady = cond(karpv1.ConditionTypeNodeClassReady, metav1.ConditionUnknown, "NodeClassReadinessUnknown", nodeClass.Ready.Message)
	default:
		classReady = cond(karpv1.ConditionTypeNodeClassReady, metav1.ConditionTrue, karpv1.ConditionTypeNodeClassReady, "")
	}
	out = append(out, classReady)
	ready := cond(karpv1.ConditionTypeReady, metav1.ConditionTrue, karpv1.ConditionTypeReady, "")
	for _, c := range out {
		if c.Status != metav1.ConditionTrue {
			ready = cond(karpv1.ConditionTypeReady, c.Status, c.Reason, c.Message)
			break
		}
	}
	return append(out, ready)
}

// IsReady reports whether a NodePool may launch nodes.
func IsReady(np *karpv1.NodePool) bool {
	return meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady)
}
