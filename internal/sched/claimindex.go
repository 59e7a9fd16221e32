package sched

import (
	"cmp"
	"slices"

	"github.com/nodewright/nodewright/internal/sched/resources"
)

// claimIndex keeps the in-flight claims sorted by score: the room their
// cheapest candidate type has left, in node-shape units (see slack). Adding
// or moving a claim is a binary search and a copy.
type claimIndex struct {
	claims []scoredClaim
}

type scoredClaim struct {
	score float64
	seq   int // creation order, to break ties deterministically
	c     *claim
}

func (ix *claimIndex) less(a, b scoredClaim) int {
	return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.seq, b.seq))
}

func (ix *claimIndex) add(c *claim, score float64) {
	c.score = score
	e := scoredClaim{score: score, seq: c.seq, c: c}
	i, _ := slices.BinarySearchFunc(ix.claims, e, ix.less)
	ix.claims = slices.Insert(ix.claims, i, e)
}

// remove takes c out, found by the score it was added with (claim.score).
func (ix *claimIndex) remove(c *claim) {
	i, found := slices.BinarySearchFunc(ix.claims, scoredClaim{score: c.score, seq: c.seq}, ix.less)
	if found {
		ix.claims = slices.Delete(ix.claims, i, i+1)
	}
}

// firstWithRoom returns the index of the first claim with at least size of
// room.
func (ix *claimIndex) firstWithRoom(size float64) int {
	i, _ := slices.BinarySearchFunc(ix.claims, size, func(e scoredClaim, s float64) int { return cmp.Compare(e.score, s) })
	return i
}

// claimScore is the room the claim's cheapest candidate has left.
func (s *solver) claimScore(c *claim) float64 {
	return s.slack(c.types[0].allocatable, c.requests)
}

// podSize is the pod's requests in the same units as claimScore.
func (s *solver) podSize(p *podState) float64 {
	return s.slack(p.requests, make(resources.Vector, 0))
}

// indexClaim places a claim in the solver's index and in the open index of
// every blocking group it holds no selected pod of.
func (s *solver) indexClaim(c *claim) {
	score := s.claimScore(c)
	s.index.add(c, score)
	for _, g := range s.blockingGroups {
		if g.counts[c.hostname] == 0 {
			g.open.add(c, score)
		}
	}
}

// unindexClaim takes a claim out of every index it is in, before its score
// changes.
func (s *solver) unindexClaim(c *claim) {
	s.index.remove(c)
	for _, g := range s.blockingGroups {
		if g.counts[c.hostname] == 0 {
			g.open.remove(c)
		}
	}
}
