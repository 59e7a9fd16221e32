package sched

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// podState is a pending pod prepared for the solver, with its preferences
// and how far they have been relaxed.
type podState struct {
	pod      *corev1.Pod
	requests resources.Vector
	// terms are the alternatives of required node affinity (ORed), each
	// already ANDed with the nodeSelector; term is the one in use.
	terms []requirement.Requirements
	term  int
	// preferred node-affinity terms, heaviest first; the first not yet
	// dropped is treated as required.
	preferred []requirement.Requirements
	pref      int
	// tolerations, plus Exists:PreferNoSchedule once relaxed that far.
	tolerations        []corev1.Toleration
	toleratesPreferred bool
	// revisited: the required terms were swept again with every preference
	// dropped.
	revisited bool
	// invalid explains a pod spec the solver cannot use.
	invalid error
	// ports are the host ports the pod binds.
	ports []hostPort

	// Topology: spread constraints (hard, and soft ones treated as hard until
	// dropped), pod affinity and anti-affinity (required, and preferred ones,
	// heaviest first, treated as required until dropped).
	spreads, softSpreads        []*topoGroup
	affinities, prefAffinities  []*topoGroup
	antis, prefAntis            []*topoGroup
	softDropped, prefAffDropped int
	prefAntiDropped             int
	// inverse: anti-affinity groups whose selector picks this pod; it must
	// stay out of their owners' domains.
	inverse []*topoGroup
	// matched: every group whose selector picks this pod, for counting.
	matched []*topoGroup
	// eligible caches the domains the pod could reach per spread group; they
	// depend on its node affinity and tolerations, so relaxing clears it.
	eligible map[*topoGroup][]string
	// tolerated caches, per pool, whether the pod tolerates its taints.
	tolerated map[*poolState]bool
	// active caches constraints().
	active []constraint
}

// constraints lists the pod's active topology constraints; the list is
// cached until the pod is relaxed.
func (p *podState) constraints() []constraint {
	if p.active != nil {
		return p.active
	}
	out := []constraint{}
	add := func(gs []*topoGroup, inverse bool) {
		for _, g := range gs {
			out = append(out, constraint{g: g, inverse: inverse})
		}
	}
	add(p.spreads, false)
	add(p.softSpreads[p.softDropped:], false)
	add(p.affinities, false)
	add(p.prefAffinities[p.prefAffDropped:], false)
	add(p.antis, false)
	add(p.prefAntis[p.prefAntiDropped:], false)
	add(p.inverse, true)
	p.active = out
	return out
}

func newPodState(pod *corev1.Pod, ix *resources.Index) *podState {
	p := &podState{pod: pod, requests: ix.PodRequests(pod), tolerations: pod.Spec.Tolerations, ports: hostPorts(pod)}
	p.terms, p.preferred, p.invalid = podRequirements(pod)
	return p
}

// podRequirements reads nodeSelector and node affinity.
func podRequirements(pod *corev1.Pod) (terms, preferred []requirement.Requirements, err error) {
	selector := requirement.FromLabels(pod.Spec.NodeSelector)
	na := pod.Spec.Affinity
	var required []corev1.NodeSelectorTerm
	var weighted []corev1.PreferredSchedulingTerm
	if na != nil && na.NodeAffinity != nil {
		if r := na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			required = r.NodeSelectorTerms
		}
		weighted = na.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	for i, term := range required {
		if len(term.MatchFields) > 0 {
			return nil, nil, fmt.Errorf("node affinity term %d uses matchFields, which is not supported", i)
		}
		if len(term.MatchExpressions) == 0 {
			continue // an empty term matches no node; the other terms may
		}
		rs, err := requirement.FromNodeSelector(term.MatchExpressions)
		if err != nil {
			return nil, nil, fmt.Errorf("node affinity term %d: %w", i, err)
		}
		rs.AddAll(selector)
		terms = append(terms, rs)
	}
	if len(required) > 0 && len(terms) == 0 {
		return nil, nil, fmt.Errorf("required node affinity has no term that can match a node")
	}
	if len(terms) == 0 {
		terms = []requirement.Requirements{selector}
	}
	slices.SortStableFunc(weighted, func(a, b corev1.PreferredSchedulingTerm) int { return cmp.Compare(b.Weight, a.Weight) })
	for _, w := range weighted {
		if len(w.Preference.MatchFields) > 0 {
			continue // preferences the solver cannot express are ignored
		}
		rs, err := requirement.FromNodeSelector(w.Preference.MatchExpressions)
		if err != nil {
			return nil, nil, fmt.Errorf("preferred node affinity: %w", err)
		}
		preferred = append(preferred, rs)
	}
	return terms, preferred, nil
}

// requirements is what the pod currently asks of a node's labels.
func (p *podState) requirements() requirement.Requirements {
	if p.pref >= len(p.preferred) {
		return p.terms[p.term]
	}
	rs := p.terms[p.term].Clone()
	rs.AddAll(p.preferred[p.pref])
	return rs
}

// strictRequirements ignores preferences: what kube-scheduler enforces.
func (p *podState) strictRequirements() requirement.Requirements { return p.terms[p.term] }

// relax drops one preference in Karpenter's order and reports whether there
// was one to drop: the first of several required node-affinity terms, the
// heaviest preferred pod affinity, the heaviest preferred pod anti-affinity,
// the heaviest preferred node affinity, one ScheduleAnyway spread
// constraint, and then (when some pool has PreferNoSchedule taints) those
// taints are tolerated.
//
// Unlike Karpenter, a required term dropped early is not lost: the terms are
// alternatives, and one may have failed only because of a preference that
// was dropped later. So once nothing else is left, the terms are tried again
// from the first with every preference gone, as kube-scheduler would.
func (p *podState) relax(preferNoScheduleTaints bool) bool {
	p.eligible, p.tolerated, p.active = nil, nil, nil
	switch {
	case p.term < len(p.terms)-1:
		p.term++
	case p.prefAffDropped < len(p.prefAffinities):
		p.prefAffDropped++
	case p.prefAntiDropped < len(p.prefAntis):
		p.prefAntiDropped++
	case p.pref < len(p.preferred):
		p.pref++
	case p.softDropped < len(p.softSpreads):
		p.softDropped++
	case preferNoScheduleTaints && !p.toleratesPreferred:
		p.toleratesPreferred = true
		p.tolerations = append(slices.Clone(p.tolerations), corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})
	case !p.revisited && p.term > 0:
		p.revisited, p.term = true, 0
	default:
		return false
	}
	return true
}

func (p *podState) key() string { return p.pod.Namespace + "/" + p.pod.Name }

// untolerated returns the first taint the pod does not tolerate. Every effect
// counts, PreferNoSchedule included, until relaxation tolerates it.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	return schedcorev1.FindMatchingUntoleratedTaint(logr.Discard(), taints, tolerations, nil, true)
}

// sortPods orders pods the way a decreasing packing wants them: largest
// first, where size is the larger of CPU and memory measured in the catalog's
// typical node shape (memPerCPU bytes per CPU); then oldest, then by UID, for
// determinism.
func sortPods(pods []*podState, memPerCPU float64) {
	size := func(p *podState) float64 {
		return max(float64(p.requests[resources.CPU])/1000, float64(p.requests[resources.Memory])/memPerCPU)
	}
	slices.SortStableFunc(pods, func(a, b *podState) int {
		if c := cmp.Compare(size(b), size(a)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.requests[resources.CPU], a.requests[resources.CPU]); c != 0 {
			return c
		}
		if c := a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.pod.UID, b.pod.UID)
	})
}
