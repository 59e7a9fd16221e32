package sched

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// quote prices adding a pod to a claim without building the candidate: the
// rise in the price of the claim's cheapest candidate type, and the slack
// that type would keep. exact is false when the pod would change the claim's
// requirements; the caller then runs the full try. A quote that settles a
// topology domain is approximate (the domain could change the cheapest
// type); the winner's full try checks it.
func (s *solver) quote(c *claim, p *podState, preqs requirement.Requirements) (delta, slack float64, ok, exact bool) {
	requests := sumInto(s.scratchRequests[:0], c.requests, p.requests)
	s.scratchRequests = requests
	if !requests.Fits(c.maxAlloc) || !s.poolTolerated(c.pool, p) || portsConflict(c.ports, p.ports) {
		return 0, 0, false, true
	}
	if !c.reqs.Covers(preqs) {
		return 0, 0, false, false
	}
	for _, con := range p.constraints() {
		if d, settled := c.settledDomain(con.g.key); settled {
			if !s.allows(p, con, d) {
				return 0, 0, false, true
			}
			continue
		}
		if !slices.ContainsFunc(c.possibleDomains(con.g.key), func(d string) bool { return s.allows(p, con, d) }) {
			return 0, 0, false, true
		}
	}
	var room resources.Vector
	if c.pool.limited {
		room = c.pool.remaining.Plus(c.reserved)
	}
	for _, t := range c.types {
		if requests.Fits(t.allocatable) && (room == nil || c.pool.fits(t.capacity, room)) {
			return t.price - c.types[0].price, s.slack(t.allocatable, requests), true, true
		}
	}
	return 0, 0, false, true
}

// settledDomain returns the claim's domain for a key when it has exactly one.
func (c *claim) settledDomain(key string) (string, bool) {
	if key == corev1.LabelHostname {
		return c.hostname, true
	}
	if r, ok := c.reqs.Get(key); ok && r.Single() != "" {
		return r.Single(), true
	}
	return "", false
}

// possibleDomains: the domains the claim can still take for a key, cached
// until the claim next changes.
func (c *claim) possibleDomains(key string) []string {
	if d, ok := c.domainCache[key]; ok {
		return d
	}
	d := claimDomains(c.reqs, c.types, key)
	if c.domainCache == nil {
		c.domainCache = map[string][]string{}
	}
	c.domainCache[key] = d
	return d
}

// poolTolerated caches whether the pod tolerates a pool's taints; relaxing
// the pod clears the cache.
func (s *solver) poolTolerated(ps *poolState, p *podState) bool {
	if v, ok := p.tolerated[ps]; ok {
		return v
	}
	_, bad := untolerated(ps.taints, p.tolerations)
	if p.tolerated == nil {
		p.tolerated = map[*poolState]bool{}
	}
	p.tolerated[ps] = !bad
	return !bad
}

// bestClaim returns the in-flight claim that takes the pod at the least
// extra cost: the rise in the price of its cheapest candidate type, the
// tightest fit among equals. Like Karpenter, a claim that can take the pod
// is always preferred to opening a new one.
//
// Claims are found through their room (see claimIndex): first the tightest
// claim with room for the pod, at no extra cost; only when there is none,
// the cheapest to grow among the claims nearest the pod's size.
func (s *solver) bestClaim(p *podState, preqs requirement.Requirements) (*claim, candidate) {
	// Search the smallest index that can hold the answer: a blocking
	// group's open claims when the pod has such a constraint.
	index := &s.index
	for _, con := range p.constraints() {
		if open := con.openIndex(p); open != nil && open.len() < index.len() {
			index = open
		}
	}
	if index.len() == 0 {
		return nil, candidate{}
	}
	options := s.scratchQuotes[:0]
	defer func() { s.scratchQuotes = options[:0] }()
	consider := func(c *claim) (claimQuote, bool) {
		delta, slack, ok, exact := s.quote(c, p, preqs)
		if !exact {
			cand, fits := c.try(s, p, preqs)
			if !fits {
				return claimQuote{}, false
			}
			delta, slack, ok = cand.types[0].price-c.types[0].price, s.slack(cand.types[0].allocatable, cand.requests), true
		}
		return claimQuote{c, delta, slack}, ok
	}
	// First choice: the tightest claim that takes the pod at no extra cost.
	free := index.tightest(p.requests.At(resources.CPU), p.requests.At(resources.Memory), s.memPerCPU, func(c *claim) bool {
		q, ok := consider(c)
		if ok && q.delta == 0 {
			options = append(options, q)
			return true
		}
		return false
	})
	if free == nil {
		// Every claim would have to grow: weigh those nearest the pod's size,
		// on both sides, and keep the cheapest.
		const near = 16
		start := index.firstWithRoom(s.podSize(p))
		for i, found := start, 0; i < index.len() && found < near; i++ {
			if q, ok := consider(index.bySum[i].c); ok {
				options, found = append(options, q), found+1
			}
		}
		for i, found := start-1, 0; i >= 0 && found < near; i-- {
			if q, ok := consider(index.bySum[i].c); ok {
				options, found = append(options, q), found+1
			}
		}
	}
	// Take the best; should its full try disagree with the quote, the next.
	for len(options) > 0 {
		i := 0
		for j, o := range options {
			if o.delta < options[i].delta || (o.delta == options[i].delta && o.slack < options[i].slack) {
				i = j
			}
		}
		if cand, ok := options[i].c.try(s, p, preqs); ok {
			return options[i].c, cand
		}
		options = slices.Delete(options, i, i+1)
	}
	return nil, candidate{}
}

// claimQuote is one claim's price for taking a pod.
type claimQuote struct {
	c            *claim
	delta, slack float64
}
