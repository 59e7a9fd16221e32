package disruption

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PDBs answers, at decision time, whether PodDisruptionBudgets would let a
// pod be evicted now, so a node whose drain would stall is not chosen.
type PDBs struct {
	byNamespace map[string][]pdbState
}

type pdbState struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	// allowed is how many more pods it lets go.
	allowed int32
}

// NewPDBs reads the budgets with the pods they select. A budget whose status
// the disruption controller has observed (status.observedGeneration at its
// generation) counts status.disruptionsAllowed; otherwise the allowance is
// worked out from the pods (healthy ones minus those the budget needs), as
// kube-controller-manager would.
func NewPDBs(pdbs []*policyv1.PodDisruptionBudget, pods []*corev1.Pod) *PDBs {
	out := &PDBs{byNamespace: map[string][]pdbState{}}
	for _, pdb := range pdbs {
		// As the Eviction API for policy/v1: no selector selects nothing,
		// an empty one every pod of the namespace.
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		st := pdbState{pdb: pdb, selector: selector, allowed: pdb.Status.DisruptionsAllowed}
		if pdb.Generation == 0 || pdb.Status.ObservedGeneration < pdb.Generation {
			st.allowed = computedAllowance(pdb, selector, pods)
		}
		out.byNamespace[pdb.Namespace] = append(out.byNamespace[pdb.Namespace], st)
	}
	return out
}

func computedAllowance(pdb *policyv1.PodDisruptionBudget, selector labels.Selector, pods []*corev1.Pod) int32 {
	var expected, healthy int32
	for _, p := range pods {
		if p.Namespace != pdb.Namespace || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		expected++
		if p.DeletionTimestamp == nil && podReady(p) {
			healthy++
		}
	}
	var desired int32
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0
		}
		desired = int32(v)
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0
		}
		desired = max(expected-int32(v), 0)
	default:
		return expected // no constraint given: nothing is protected
	}
	return max(healthy-desired, 0)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Blocking says why evicting the pod is not allowed now, or "": it is
// covered by more than one budget (the Eviction API refuses those), or by
// one that allows no disruption, unless that budget lets unhealthy pods go
// (unhealthyPodEvictionPolicy AlwaysAllow) and the pod is not ready.
func (b *PDBs) Blocking(p *corev1.Pod) string {
	if b == nil {
		return ""
	}
	var covering []pdbState
	for _, st := range b.byNamespace[p.Namespace] {
		if st.selector.Matches(labels.Set(p.Labels)) {
			covering = append(covering, st)
		}
	}
	switch {
	case len(covering) > 1:
		names := make([]string, len(covering))
		for i, st := range covering {
			names[i] = st.pdb.Name
		}
		return fmt.Sprintf("pod %s/%s is covered by more than one PodDisruptionBudget (%s)", p.Namespace, p.Name, strings.Join(names, ", "))
	case len(covering) == 1 && covering[0].allowed <= 0:
		pdb := covering[0].pdb
		if pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow && !podReady(p) {
			return ""
		}
		return fmt.Sprintf("PodDisruptionBudget %s/%s allows 0 disruptions (pod %s)", pdb.Namespace, pdb.Name, p.Name)
	}
	return ""
}
