package fieldpatch

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OwnedConditions applies to conds the change from was to want of the
// conditions of the given types (the ones the caller owns): a condition
// that changed is set (keeping conds' transition time when its status is
// the same), one that went away is removed, and every other condition,
// another controller's included, is left as conds has it.
func OwnedConditions(conds *[]metav1.Condition, was, want []metav1.Condition, types ...string) {
	for _, t := range types {
		w, n := meta.FindStatusCondition(was, t), meta.FindStatusCondition(want, t)
		switch {
		case n == nil && w != nil:
			meta.RemoveStatusCondition(conds, t)
		case n != nil && (w == nil || !equality.Semantic.DeepEqual(*w, *n)):
			meta.SetStatusCondition(conds, *n)
		}
	}
}
