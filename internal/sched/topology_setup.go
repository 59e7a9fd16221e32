package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setupTopology builds the groups of every pending pod's constraints, counts
// the pods already running in them, records the running pods' required
// anti-affinity, and tells each pending pod which groups select it.
func (s *solver) setupTopology(pods []*podState) {
	s.topo = &topology{groups: map[string]*topoGroup{}, namespaceLabels: s.in.Namespaces}
	// Replicas of one controller share one template, hence the same
	// constraints: their groups are built once.
	byOwner := map[types.UID]*podState{}
	for _, p := range pods {
		if p.invalid != nil {
			continue
		}
		ref := metav1.GetControllerOf(p.pod)
		if ref != nil && ref.UID != "" {
			if first, ok := byOwner[ref.UID]; ok && sameTopologySpec(first.pod, p.pod) {
				p.spreads, p.softSpreads, p.affinities, p.prefAffinities, p.antis, p.prefAntis =
					first.spreads, first.softSpreads, first.affinities, first.prefAffinities, first.antis, first.prefAntis
				continue
			}
		}
		if err := s.podTopology(p); err != nil {
			p.invalid = err
			continue
		}
		if ref != nil && ref.UID != "" {
			if _, ok := byOwner[ref.UID]; !ok {
				byOwner[ref.UID] = p
			}
		}
	}
	for _, ns := range s.nodes {
		for _, q := range ns.node.Pods {
			if ignoredForTopology(q) || q.Spec.Affinity == nil || q.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for _, term := range q.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				g, err := s.topo.affinityGroup(q, topoAntiAffinity, term)
				if err != nil {
					continue
				}
				if d, ok := nodeDomain(ns.node, g.key); ok {
					g.owners[d]++
				}
			}
		}
	}
	groups := s.topo.ordered()
	for _, g := range groups {
		if g.blocking() {
			g.open = &claimIndex{}
			s.blockingGroups = append(s.blockingGroups, g)
		}
	}
	for _, ns := range s.nodes {
		for _, q := range ns.node.Pods {
			if ignoredForTopology(q) {
				continue
			}
			for _, g := range groups {
				if d, ok := nodeDomain(ns.node, g.key); ok && g.selects(q) {
					g.counts[d]++
					g.selected++
				}
			}
		}
	}
	for _, p := range pods {
		for _, g := range groups {
			if g.selects(p.pod) {
				p.matched = append(p.matched, g)
				if g.kind == topoAntiAffinity {
					p.inverse = append(p.inverse, g)
				}
			}
		}
	}
}

// sameTopologySpec: two pods of one controller ask the same of topology:
// same namespace and labels (selectors may take keys from them), and
// constraints of the same shape. The constraints themselves come from the
// controller's template; comparing them in depth costs as much as reading
// them again.
func sameTopologySpec(a, b *corev1.Pod) bool {
	return a.Namespace == b.Namespace && maps.Equal(a.Labels, b.Labels) &&
		len(a.Spec.TopologySpreadConstraints) == len(b.Spec.TopologySpreadConstraints) && (a.Spec.Affinity == nil) == (b.Spec.Affinity == nil)
}

// ordered returns the groups in a stable order.
func (t *topology) ordered() []*topoGroup {
	out := make([]*topoGroup, 0, len(t.groups))
	for _, g := range t.groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *topoGroup) int { return cmp.Compare(a.id, b.id) })
	return out
}

// podTopology reads a pod's spread constraints and pod (anti-)affinity.
func (s *solver) podTopology(p *podState) error {
	var err error
	if p.spreads, p.softSpreads, err = s.topo.spreadGroups(p.pod); err != nil {
		return err
	}
	a := p.pod.Spec.Affinity
	if a == nil {
		return nil
	}
	if a.PodAffinity != nil {
		if p.affinities, p.prefAffinities, err = s.termGroups(p.pod, topoAffinity, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return fmt.Errorf("pod affinity: %w", err)
		}
	}
	if a.PodAntiAffinity != nil {
		if p.antis, p.prefAntis, err = s.termGroups(p.pod, topoAntiAffinity, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return fmt.Errorf("pod anti-affinity: %w", err)
		}
	}
	return nil
}

// termGroups builds the groups of required terms and of preferred terms,
// heaviest first.
func (s *solver) termGroups(p *corev1.Pod, kind topoKind, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) (req, pref []*topoGroup, err error) {
	for _, term := range required {
		g, err := s.topo.affinityGroup(p, kind, term)
		if err != nil {
			return nil, nil, err
		}
		req = append(req, g)
	}
	weighted := slices.Clone(preferred)
	slices.SortStableFunc(weighted, func(a, b corev1.WeightedPodAffinityTerm) int { return cmp.Compare(b.Weight, a.Weight) })
	for _, w := range weighted {
		g, err := s.topo.affinityGroup(p, kind, w.PodAffinityTerm)
		if err != nil {
			return nil, nil, err
		}
		pref = append(pref, g)
	}
	return req, pref, nil
}
