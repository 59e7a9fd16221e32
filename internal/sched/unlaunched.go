package sched

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// prepareUnlaunched readies a NodeClaim not launched yet as a place for
// pods: its requirements (with its labels) say what its node may be, and
// its room (what the claim asked for) keeps the share of the DaemonSet
// pods that will run on it.
func (s *solver) prepareUnlaunched(ns *nodeState) {
	n := ns.node
	reqs, err := requirement.FromAPI(n.Requirements)
	if err != nil {
		ns.invalid = fmt.Errorf("nodeclaim %s: spec.requirements: %w", n.Name, err)
		return
	}
	reqs.AddAll(requirement.FromLabels(n.Labels))
	if bad := reqs.Unsatisfiable(); len(bad) > 0 {
		ns.invalid = fmt.Errorf("nodeclaim %s: spec.requirements: no node can meet %v", n.Name, bad)
		return
	}
	ns.unlaunched, ns.reqs = true, reqs
	ns.available = ns.available.Minus(s.unlaunchedDaemons(ns))
}

// unlaunchedDaemons sums the requests of the DaemonSet pods that may run on
// an unlaunched claim's node and are not among its pods yet: they tolerate
// its taints (PreferNoSchedule aside) and their node affinity is compatible
// with its requirements. Its requests were sized with them (sched's
// NodeClaim.Requests), so other pods must not take their share.
func (s *solver) unlaunchedDaemons(ns *nodeState) resources.Vector {
	total := make(resources.Vector, s.ix.Len())
	have := map[string]bool{}
	for _, p := range ns.node.Pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
			have[p.Namespace+"/"+ref.Name] = true
		}
	}
	taints := noPreferNoSchedule(ns.node.Taints)
	for _, ds := range s.daemons {
		if ref := metav1.GetControllerOf(ds.pod); ref != nil && have[ds.pod.Namespace+"/"+ref.Name] {
			continue
		}
		if _, bad := untolerated(taints, ds.tolerations); bad {
			continue
		}
		if slices.ContainsFunc(ds.terms, func(t requirement.Requirements) bool { return ns.reqs.Compatible(t, s.daemonKnown) == nil }) {
			total = total.AddInPlace(ds.requests)
		}
	}
	return total
}

// admit returns what an unlaunched claim's node may still be with the pod
// on it: its requirements narrowed by the pod's, then by the pod's topology
// constraints (settling, say, the zone a spread asks for). False when the
// constraints leave no domain.
func (s *solver) admit(ns *nodeState, p *podState, preqs requirement.Requirements) (requirement.Requirements, bool) {
	for _, k := range preqs.Keys() {
		if s.wellKnown[k] && !ns.reqs.Has(k) {
			// The node will carry the label, with a value the claim does
			// not bound: a NotIn or DoesNotExist cannot be promised.
			return requirement.Requirements{}, false
		}
	}
	reqs := ns.reqs
	if !reqs.Covers(preqs) {
		reqs = reqs.Clone()
		reqs.AddAll(preqs)
	}
	hostname, _ := nodeDomain(ns.node, corev1.LabelHostname)
	return s.narrow(p, reqs, nil, hostname)
}

// domainsOf returns the domains a node can take for a key: its label, or
// for an unlaunched claim the values its requirements still allow (one once
// settled).
func (ns *nodeState) domainsOf(key string) []string {
	if d, ok := nodeDomain(ns.node, key); ok {
		return []string{d}
	}
	if !ns.unlaunched {
		return nil
	}
	if r, ok := ns.reqs.Get(key); ok {
		if values, finite := r.Values(); finite && !r.AllowsAbsent() {
			return values
		}
	}
	return nil
}
