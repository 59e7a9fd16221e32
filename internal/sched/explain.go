package sched

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
)

// explain says, for each NodePool, why it cannot launch a node for the pod:
// the first check that rules it out, in the order the solver applies them.
func (s *solver) explain(p *podState) string {
	if len(s.pools) == 0 {
		return "no existing node fits and no NodePool can launch nodes"
	}
	preqs := p.requirements()
	parts := make([]string, 0, len(s.pools))
	for _, ps := range s.pools {
		parts = append(parts, fmt.Sprintf("NodePool %s: %s", ps.name, s.poolReason(ps, p, preqs)))
	}
	return strings.Join(parts, "; ")
}

func (s *solver) poolReason(ps *poolState, p *podState, preqs requirement.Requirements) string {
	if ps.invalid != nil {
		return ps.invalid.Error()
	}
	if t, bad := untolerated(ps.taints, p.tolerations); bad {
		return fmt.Sprintf("taint %s not tolerated", t.ToString())
	}
	if err := ps.reqs.Compatible(preqs, s.wellKnown); err != nil {
		return "requirements not met: " + err.Error()
	}
	if portsConflict(ps.daemonPorts, p.ports) {
		return "a DaemonSet pod on its nodes binds the same host port"
	}
	if len(ps.types) == 0 {
		return fmt.Sprintf("no instance type%s has an available offering", scope(ps.reqs))
	}
	if keys := preqs.Unsatisfiable(); len(keys) > 0 {
		return fmt.Sprintf("the pod's own requirements on %s cannot all hold (its node selector, node affinity and volumes disagree)", strings.Join(keys, ", "))
	}
	reqs := ps.reqs.Clone()
	reqs.AddAll(preqs)
	var matching, offered, fitting []*typeState
	for _, t := range ps.types {
		if requirement.FromLabels(t.it.Labels).Intersects(reqs) != nil {
			continue // its labels rule it out, whatever the offering
		}
		matching = append(matching, t)
		if t.hasOffering(reqs) && t.reqs.Intersects(reqs) == nil {
			offered = append(offered, t)
		}
	}
	switch {
	case len(matching) == 0:
		return fmt.Sprintf("no instance type%s matches %s", scope(ps.reqs), preqs)
	case len(offered) == 0:
		return fmt.Sprintf("no available offering%s for %s%s", scope(ps.reqs), preqs, s.refusedOfferings(matching, reqs))
	}
	for slot, need := range p.requests {
		if need == 0 {
			continue
		}
		enough := false
		for _, t := range offered {
			enough = enough || t.allocatable.At(slot) >= need
		}
		if !enough {
			name := s.ix.Name(slot)
			q := s.ix.ResourceList(slotOnly(p.requests, slot))[name]
			return fmt.Sprintf("no instance type%s has enough %s (requested %s)", scope(ps.reqs), name, q.String())
		}
	}
	for _, t := range offered {
		if p.requests.Fits(t.allocatable) {
			fitting = append(fitting, t)
		}
	}
	if len(fitting) == 0 {
		return fmt.Sprintf("no instance type%s fits all of %s at once", scope(ps.reqs), formatResources(s.ix.ResourceList(p.requests)))
	}
	if r, ok := minValuesShortfall(reqs, fitting); !ok && s.in.MinValuesPolicy != MinValuesBestEffort {
		return r
	}
	if r := s.topoReason(p, reqs, fitting); r != "" {
		return r
	}
	switch {
	case ps.nodesLeft == 0:
		return "limit on nodes reached"
	case ps.limited:
		return "limits exceeded: room left is " + ps.limitsString(s.ix)
	}
	return "no NodeClaim from it can take the pod alongside the pods already planned"
}

// refusedOfferings lists, for messages, the offerings the requirements
// allow that are out of capacity or not offered now.
func (s *solver) refusedOfferings(types []*typeState, reqs requirement.Requirements) string {
	admits := offeringFilter(reqs)
	var out []string
	for _, t := range types {
		for _, o := range t.it.Offerings {
			if !admits(o) {
				continue
			}
			switch {
			case s.in.Unavailable != nil && s.in.Unavailable(t.it.Name, o.Zone, o.CapacityType):
				out = append(out, fmt.Sprintf("%s/%s/%s is out of capacity", t.it.Name, o.Zone, o.CapacityType))
			case !o.Available:
				out = append(out, fmt.Sprintf("%s/%s/%s is not available", t.it.Name, o.Zone, o.CapacityType))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return ": " + strings.Join(out, ", ")
}

// scope names the pool requirements that pick instance types, e.g.
// " (karpenter.k8s.aws/instance-category In [c m r])", for messages.
func scope(reqs requirement.Requirements) string {
	var parts []string
	for _, k := range reqs.Keys() {
		if strings.Contains(k, "/instance-") {
			r, _ := reqs.Get(k)
			parts = append(parts, r.String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// formatResources renders a resource list as "cpu=2, memory=4Gi".
func formatResources(rl corev1.ResourceList) string {
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := rl[corev1.ResourceName(n)]
		parts = append(parts, n+"="+q.String())
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func slotOnly(v []int64, slot int) []int64 {
	out := make([]int64, len(v))
	out[slot] = v[slot]
	return out
}
