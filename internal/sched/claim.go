package sched

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// claim is a NodeClaim being built: the pods placed on it so far, the
// requirements they share, and the instance types that still fit them all.
type claim struct {
	pool *poolState
	// hostname is a placeholder: the claim's own domain for hostname topology.
	hostname string
	reqs     requirement.Requirements
	requests resources.Vector // the pods' requests
	types    []*typeState     // cheapest first
	pods     []*podState
	// reserved is charged against the pool's limits while solving: the
	// capacity of the cheapest candidate, the one a launch would pick.
	// Finalizing trims the options so that even the largest stays within.
	reserved resources.Vector
	// maxAlloc is the slot-wise largest allocatable among the candidates: a
	// cheap first test before the full filter.
	maxAlloc resources.Vector
	// domainCache: the domains the claim can still take, per key.
	domainCache map[string][]string
	// ports: host ports bound by its pods and by the pool's DaemonSet pods.
	ports []hostPort
	// seq (creation order) and room (left in the cheapest candidate) place
	// it in the indexes.
	seq  int
	room room
}

// candidate is the outcome of trying a pod on a claim.
type candidate struct {
	reqs     requirement.Requirements
	requests resources.Vector
	types    []*typeState
}

// try returns how the claim would look with the pod added, or false.
func (c *claim) try(s *solver, p *podState, preqs requirement.Requirements) (candidate, bool) {
	requests := sumInto(s.scratchRequests[:0], c.requests, p.requests)
	s.scratchRequests = requests
	if !requests.Fits(c.maxAlloc) {
		return candidate{}, false
	}
	if !s.poolTolerated(c.pool, p) || portsConflict(c.ports, p.ports) {
		return candidate{}, false
	}
	if c.pool.reqs.Compatible(preqs, s.wellKnown) != nil || c.reqs.Intersects(preqs) != nil {
		return candidate{}, false
	}
	reqs := c.reqs
	if !c.reqs.Covers(preqs) {
		reqs = c.reqs.Clone()
		reqs.AddAll(preqs)
	}
	var keep func(*typeState) bool
	if c.pool.limited {
		room := c.pool.remaining.Plus(c.reserved)
		keep = func(t *typeState) bool { return c.pool.fits(t.capacity, room) }
	}
	types, reqs, ok := s.fitTypes(p, c.types, c.reqs, reqs, requests, c.hostname, keep)
	if !ok {
		return candidate{}, false
	}
	return candidate{reqs: reqs, requests: requests, types: types}, true
}

// commit adds the pod, narrowing the candidates and moving the claim's
// charge against the pool's limits to its new cheapest candidate. The
// candidate may live in scratch buffers; commit copies it.
func (c *claim) commit(p *podState, cand candidate) {
	c.pods = append(c.pods, p)
	c.ports = append(c.ports, p.ports...)
	c.domainCache = nil
	c.reqs = cand.reqs
	c.requests = append(c.requests[:0], cand.requests...)
	c.types = append(c.types[:0], cand.types...) // a subset: it never grows
	c.maxAlloc = maxInto(c.maxAlloc, c.types, func(t *typeState) resources.Vector { return t.allocatable })
	if c.pool.limited {
		c.pool.remaining = c.pool.remaining.Plus(c.reserved).Minus(c.types[0].capacity)
		c.reserved = c.types[0].capacity
	}
}

// fitTypes filters the types for the requirements and requests, then applies
// the pod's topology constraints, which may narrow the requirements (to one
// zone, say) and so the types again.
//
// types must already meet base (the claim's requirements before this pod);
// when reqs adds nothing to base, only resources are re-checked.
func (s *solver) fitTypes(p *podState, types []*typeState, base, reqs requirement.Requirements, requests resources.Vector, hostname string, keep func(*typeState) bool) ([]*typeState, requirement.Requirements, bool) {
	if base.Covers(reqs) {
		types = fitting(s.scratchTypes, types, requests, keep)
		s.scratchTypes = types
	} else {
		types = filterTypes(types, reqs, requests, keep)
	}
	if len(types) == 0 {
		return nil, reqs, false
	}
	narrowed, ok := s.narrow(p, reqs, types, hostname)
	if !ok {
		return nil, reqs, false
	}
	if !reqs.Covers(narrowed) {
		types = filterTypes(types, narrowed, requests, nil)
	}
	if _, ok := minValuesShortfall(narrowed, types); !ok && s.in.MinValuesPolicy != MinValuesBestEffort {
		return nil, reqs, false
	}
	return types, narrowed, len(types) > 0
}

// minValuesShortfall checks every minValues requirement against the types:
// they must span at least that many distinct values of the key (Karpenter's
// Strict policy). It returns the first requirement short of it.
func minValuesShortfall(reqs requirement.Requirements, types []*typeState) (string, bool) {
	mins := reqs.MinValues()
	if len(mins) == 0 {
		return "", true
	}
	reached := minValuesReached(reqs, types)
	for _, key := range slices.Sorted(maps.Keys(mins)) {
		if reached[key] < mins[key] {
			return fmt.Sprintf("minValues: %s needs %d distinct values, the instance types that fit offer %d", key, mins[key], reached[key]), false
		}
	}
	return "", true
}

// minValuesReached counts, for each key with a minValues, the distinct
// values the types span within reqs.
func minValuesReached(reqs requirement.Requirements, types []*typeState) map[string]int {
	mins := reqs.MinValues()
	if len(mins) == 0 {
		return nil
	}
	out := make(map[string]int, len(mins))
	for key := range mins {
		seen := map[string]bool{}
		for _, t := range types {
			for _, d := range typeDomains(t, key) {
				if reqAllows(reqs, key, d) {
					seen[d] = true
				}
			}
		}
		out[key] = len(seen)
	}
	return out
}

// sumInto writes a + b into dst (reusing its storage) and returns it.
func sumInto(dst, a, b resources.Vector) resources.Vector {
	n := max(len(a), len(b))
	for i := range n {
		dst = append(dst, a.At(i)+b.At(i))
	}
	return dst
}

// fitting keeps the types that hold requests (and that keep accepts), into
// out's storage.
func fitting(out, types []*typeState, requests resources.Vector, keep func(*typeState) bool) []*typeState {
	out = out[:0]
	for _, t := range types {
		if requests.Fits(t.allocatable) && (keep == nil || keep(t)) {
			out = append(out, t)
		}
	}
	return out
}

// domainsOf returns the domains a claim's node can take for a key.
func (c *claim) domainsOf(key string) []string {
	if key == corev1.LabelHostname {
		return []string{c.hostname}
	}
	return c.possibleDomains(key)
}

// filterTypes keeps the types whose labels meet reqs, that have an admitted
// offering, that hold requests, and that keep (when set) accepts.
func filterTypes(types []*typeState, reqs requirement.Requirements, requests resources.Vector, keep func(*typeState) bool) []*typeState {
	var out []*typeState
	admits := offeringFilter(reqs)
	for _, t := range types {
		if !requests.Fits(t.allocatable) || (keep != nil && !keep(t)) {
			continue
		}
		if t.reqs.Intersects(reqs) != nil || !slices.ContainsFunc(t.offerings, admits) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// envelope returns the slot-wise largest capacity and allocatable of types.
func envelope(types []*typeState) (capacity, allocatable resources.Vector) {
	return maxInto(nil, types, func(t *typeState) resources.Vector { return t.capacity }),
		maxInto(nil, types, func(t *typeState) resources.Vector { return t.allocatable })
}

// maxInto writes the slot-wise maximum of of(t) over types into dst's
// storage and returns it.
func maxInto(dst resources.Vector, types []*typeState, of func(*typeState) resources.Vector) resources.Vector {
	dst = dst[:0]
	for _, t := range types {
		v := of(t)
		for len(dst) < len(v) {
			dst = append(dst, 0)
		}
		for i, n := range v {
			dst[i] = max(dst[i], n)
		}
	}
	return dst
}
