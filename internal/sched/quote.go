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
// Claims are scanned in order of the room they have left (see claimIndex).
// A pod of size z only fits without extra cost in claims with at least z of
// room, so the scan starts there and goes up: the first claim that takes it
// at no extra cost is the tightest such fit. Only if there is none does it go
// down, through claims that would have to grow, keeping the cheapest of the
// first few that can.
func (s *solver) bestClaim(p *podState, preqs requirement.Requirements) (*claim, candidate) {
	// Scan the smallest index that can hold the answer: a blocking
	// group's open claims when the pod has such a constraint.
	index := &s.index
	for _, con := range p.constraints() {
		if open := con.openIndex(p); open != nil && len(open.claims) < len(index.claims) {
			index = open
		}
	}
	if len(index.claims) == 0 {
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
	start := index.firstWithRoom(s.podSize(p))
	for i := start; i < len(index.claims); i++ {
		if q, ok := consider(index.claims[i].c); ok {
			options = append(options, q)
			if q.delta == 0 {
				break
			}
		}
	}
	if len(options) == 0 || options[len(options)-1].delta != 0 {
		const growing = 16 // claims that would have to grow: keep the cheapest of this many
		found := 0
		for i := start - 1; i >= 0 && found < growing; i-- {
			if q, ok := consider(index.claims[i].c); ok {
				options = append(options, q)
				found++
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
