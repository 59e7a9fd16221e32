package sched

import (
	"slices"

	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// claim is a NodeClaim being built: the pods placed on it so far, the
// requirements they share, and the instance types that still fit them all.
type claim struct {
	pool     *poolState
	reqs     requirement.Requirements
	requests resources.Vector // the pods' requests
	types    []*typeState     // cheapest first
	pods     []*podState
	// reserved is charged against the pool's limits: the slot-wise largest
	// capacity among the candidate types, so no launch choice can exceed them.
	reserved resources.Vector
	// maxAlloc is the slot-wise largest allocatable among the candidates: a
	// cheap first test before the full filter.
	maxAlloc resources.Vector
}

// candidate is the outcome of trying a pod on a claim.
type candidate struct {
	reqs     requirement.Requirements
	requests resources.Vector
	types    []*typeState
}

// try returns how the claim would look with the pod added, or false.
func (c *claim) try(s *solver, p *podState, preqs requirement.Requirements) (candidate, bool) {
	requests := c.requests.Plus(p.requests)
	if !requests.Fits(c.maxAlloc) {
		return candidate{}, false
	}
	if _, bad := untolerated(c.pool.taints, p.tolerations); bad {
		return candidate{}, false
	}
	if c.pool.reqs.Compatible(preqs, s.wellKnown) != nil || c.reqs.Intersects(preqs) != nil {
		return candidate{}, false
	}
	reqs := c.reqs.Clone()
	reqs.AddAll(preqs)
	types := filterTypes(c.types, reqs, requests, nil)
	if len(types) == 0 {
		return candidate{}, false
	}
	return candidate{reqs: reqs, requests: requests, types: types}, true
}

// commit adds the pod, narrowing the candidates and releasing the limit
// headroom the dropped types had reserved.
func (c *claim) commit(p *podState, cand candidate) {
	c.pods = append(c.pods, p)
	c.reqs, c.requests, c.types = cand.reqs, cand.requests, cand.types
	reserved, maxAlloc := envelope(c.types)
	if c.pool.limited {
		c.pool.remaining = c.pool.remaining.Plus(c.reserved).Minus(reserved)
	}
	c.reserved, c.maxAlloc = reserved, maxAlloc
}

// filterTypes keeps the types whose labels meet reqs, that have an admitted
// offering, that hold requests, and that keep (when set) accepts.
func filterTypes(types []*typeState, reqs requirement.Requirements, requests resources.Vector, keep func(*typeState) bool) []*typeState {
	var out []*typeState
	for _, t := range types {
		if !requests.Fits(t.allocatable) || (keep != nil && !keep(t)) {
			continue
		}
		if t.reqs.Intersects(reqs) != nil || !t.hasOffering(reqs) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// envelope returns the slot-wise largest capacity and allocatable of types.
func envelope(types []*typeState) (capacity, allocatable resources.Vector) {
	for _, t := range types {
		capacity, allocatable = capacity.Max(t.capacity), allocatable.Max(t.allocatable)
	}
	return capacity, allocatable
}

// sortClaims orders in-flight claims for trying: fewest pods first, so that
// pods spread onto half-empty claims before full ones are topped up.
func sortClaims(claims []*claim) {
	slices.SortStableFunc(claims, func(a, b *claim) int { return len(a.pods) - len(b.pods) })
}
