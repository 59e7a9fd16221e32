package sched

import (
	"cmp"
	"slices"

	"github.com/nodewright/nodewright/internal/sched/resources"
)

// cpuBucket is the width, in millicores, of the index's CPU-room buckets.
const cpuBucket = 100

// claimIndex finds claims by the room their cheapest candidate type has
// left. It keeps two views of the same claims:
//
//   - buckets by CPU room (cpuBucket wide), each sorted by memory room, so
//     the claim that takes a pod at no extra cost with the least room to
//     spare is found by walking buckets upward from the pod's CPU and, in
//     each, from the pod's memory, stopping as soon as no later claim can
//     be tighter;
//   - one list sorted by total room (see slack), for the claims near the
//     pod's size that would have to grow to take it.
//
// Adding or removing a claim is a binary search and a copy in each view.
type claimIndex struct {
	bySum   []scoredClaim
	buckets [][]roomEntry
}

type scoredClaim struct {
	score float64
	seq   int // creation order, to break ties deterministically
	c     *claim
}

type roomEntry struct {
	mem int64
	seq int
	c   *claim
}

func bySumOrder(a, b scoredClaim) int {
	return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.seq, b.seq))
}

func byMemOrder(a, b roomEntry) int {
	return cmp.Or(cmp.Compare(a.mem, b.mem), cmp.Compare(a.seq, b.seq))
}

// room is what a claim's cheapest candidate has left, as last indexed.
type room struct {
	score    float64
	cpu, mem int64
}

func (ix *claimIndex) len() int { return len(ix.bySum) }

func (ix *claimIndex) add(c *claim) {
	e := scoredClaim{score: c.room.score, seq: c.seq, c: c}
	i, _ := slices.BinarySearchFunc(ix.bySum, e, bySumOrder)
	ix.bySum = slices.Insert(ix.bySum, i, e)
	b := bucketOf(c.room.cpu)
	for len(ix.buckets) <= b {
		ix.buckets = append(ix.buckets, nil)
	}
	r := roomEntry{mem: c.room.mem, seq: c.seq, c: c}
	j, _ := slices.BinarySearchFunc(ix.buckets[b], r, byMemOrder)
	ix.buckets[b] = slices.Insert(ix.buckets[b], j, r)
}

// remove takes c out, found by the room it was added with.
func (ix *claimIndex) remove(c *claim) {
	if i, found := slices.BinarySearchFunc(ix.bySum, scoredClaim{score: c.room.score, seq: c.seq}, bySumOrder); found {
		ix.bySum = slices.Delete(ix.bySum, i, i+1)
	}
	b := bucketOf(c.room.cpu)
	if b < len(ix.buckets) {
		if j, found := slices.BinarySearchFunc(ix.buckets[b], roomEntry{mem: c.room.mem, seq: c.seq}, byMemOrder); found {
			ix.buckets[b] = slices.Delete(ix.buckets[b], j, j+1)
		}
	}
}

func bucketOf(cpuMilli int64) int { return int(max(cpuMilli, 0) / cpuBucket) }

// firstWithRoom returns the position in bySum of the first claim with at
// least size of total room.
func (ix *claimIndex) firstWithRoom(size float64) int {
	i, _ := slices.BinarySearchFunc(ix.bySum, size, func(e scoredClaim, s float64) int { return cmp.Compare(e.score, s) })
	return i
}

// tightest walks the claims with at least (cpu, mem) of room in order of
// increasing waste and returns the first that take calls acceptable, with
// its waste (CPU and memory room left, in node-shape units). It prunes
// buckets and entries that cannot beat the best so far.
func (ix *claimIndex) tightest(cpu, mem int64, memPerCPU float64, take func(*claim) bool) *claim {
	var best *claim
	bestWaste := 0.0
	for b := bucketOf(cpu); b < len(ix.buckets); b++ {
		bucket := ix.buckets[b]
		if len(bucket) == 0 {
			continue
		}
		floor := max(float64(int64(b)*cpuBucket-cpu), 0) / 1000 // least CPU waste in this bucket
		if best != nil && floor >= bestWaste {
			break
		}
		i, _ := slices.BinarySearchFunc(bucket, mem, func(e roomEntry, m int64) int { return cmp.Compare(e.mem, m) })
		for ; i < len(bucket); i++ {
			e := bucket[i]
			waste := float64(e.c.room.cpu-cpu)/1000 + float64(e.mem-mem)/memPerCPU
			if e.c.room.cpu < cpu {
				continue // the bucket's first claims may be just short of the pod
			}
			if best != nil && floor+float64(e.mem-mem)/memPerCPU >= bestWaste {
				break
			}
			if take(e.c) {
				if best == nil || waste < bestWaste {
					best, bestWaste = e.c, waste
				}
				break
			}
		}
	}
	return best
}

// indexClaim places a claim in the solver's index and in the open index of
// every blocking group it holds no selected pod of.
func (s *solver) indexClaim(c *claim) {
	t := c.types[0]
	c.room = room{
		score: s.slack(t.allocatable, c.requests),
		cpu:   t.allocatable.At(resources.CPU) - c.requests.At(resources.CPU),
		mem:   t.allocatable.At(resources.Memory) - c.requests.At(resources.Memory),
	}
	s.index.add(c)
	for _, g := range s.blockingGroups {
		if g.counts[c.hostname] == 0 {
			g.open.add(c)
		}
	}
}

// unindexClaim takes a claim out of every index it is in, before its room
// changes.
func (s *solver) unindexClaim(c *claim) {
	s.index.remove(c)
	for _, g := range s.blockingGroups {
		if g.counts[c.hostname] == 0 {
			g.open.remove(c)
		}
	}
}

// podSize is the pod's requests in the units of slack.
func (s *solver) podSize(p *podState) float64 {
	return s.slack(p.requests, make(resources.Vector, 0))
}
