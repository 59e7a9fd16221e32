package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// MaxInstanceTypeOptions caps the instance types written on a NodeClaim.
const MaxInstanceTypeOptions = 600

type solver struct {
	in            Input
	ix            *resources.Index
	wellKnown     map[string]bool
	daemonKnown   map[string]bool // daemonLabels(wellKnown)
	daemons       []*podState
	pools         []*poolState
	nodes         []*nodeState
	claims        []*claim
	preferNoSched bool
	topo          *topology
	hostnames     int
	// memPerCPU is the catalog's typical memory per CPU (bytes), to weigh
	// memory against CPU.
	memPerCPU float64
	// scratch buffers for tries; a commit copies what it keeps.
	scratchTypes    []*typeState
	scratchRequests resources.Vector
	scratchQuotes   []claimQuote
	// index orders the in-flight claims by the room their cheapest
	// candidate has left; blockingGroups keep their own index of the claims
	// still open to them; claimByHost finds a claim by its placeholder.
	index          claimIndex
	blockingGroups []*topoGroup
	claimByHost    map[string]*claim
}

// Solve places the input's pods: on existing nodes and in-flight claims
// first, then on new NodeClaims from the NodePools in weight order. It never
// fails as a whole: a pod it cannot place is listed with the reason.
func Solve(in Input) Plan {
	var held []Unschedulable
	for {
		plan, dropped := solveOnce(in)
		if len(dropped) == 0 {
			plan.Unschedulable = append(plan.Unschedulable, held...)
			return plan
		}
		// The pods of a claim that could not be made may have drawn others
		// (an affinity to them, a spread counting them): decide again
		// without them. Each round removes a pod, so this ends.
		held = append(held, dropped...)
		gone := make(map[*corev1.Pod]bool, len(dropped))
		for _, u := range dropped {
			gone[u.Pod] = true
		}
		in.Pods = slices.DeleteFunc(slices.Clone(in.Pods), func(p *corev1.Pod) bool { return gone[p] })
	}
}

// solveOnce is one decision; dropped are the pods of claims finalize could
// not make (their options short of a minValues under Strict).
func solveOnce(in Input) (Plan, []Unschedulable) {
	s := &solver{in: in, ix: resources.NewIndex(), wellKnown: knownLabels(in), claimByHost: map[string]*claim{}}
	s.daemonKnown = daemonLabels(s.wellKnown)
	s.ix.RequestsOf = in.RequestsOf
	for _, d := range in.DaemonSetPods {
		if ds := newPodState(d, s.ix); ds.invalid == nil {
			s.daemons = append(s.daemons, ds)
		}
	}
	for _, np := range in.NodePools {
		ps := s.preparePool(np)
		s.pools = append(s.pools, ps)
		s.preferNoSched = s.preferNoSched || ps.preferNoSched
	}
	sortPools(s.pools)
	s.memPerCPU = typicalMemPerCPU(s.pools)
	for i := range in.Nodes {
		s.nodes = append(s.nodes, s.prepareNode(&in.Nodes[i]))
	}
	sortNodes(s.nodes)

	pods := make([]*podState, 0, len(in.Pods))
	volumes := newVolumeIndex(in)
	for _, p := range in.Pods {
		ps := newPodState(p, s.ix)
		if ps.invalid == nil {
			volumes.applyVolumes(ps)
		}
		pods = append(pods, ps)
	}
	sortPods(pods, s.memPerCPU)
	s.setupTopology(pods)

	var plan Plan
	var deferred []*podState
	for _, p := range pods {
		if p.invalid != nil {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.pod, Reason: p.invalid.Error()})
			continue
		}
		for !s.place(p) {
			if !p.relax(s.preferNoSched) {
				if requiresPodAffinity(p.pod) {
					deferred = append(deferred, p) // its target may be placed later in this solve
				} else {
					plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.pod, Reason: s.explain(p)})
				}
				break
			}
		}
	}
	// A pod with required affinity to pods placed after it (a chain such as
	// db <- web <- cache <- ui, in whatever order the pods sorted) is asked
	// again for as long as a round places one, as Karpenter's queue does.
	for progress := true; progress && len(deferred) > 0; {
		// Each round goes the other way: a chain sorted head first fails
		// head first, and is placed tail first in one round.
		slices.Reverse(deferred)
		progress = false
		still := deferred[:0]
		for _, p := range deferred {
			if s.place(p) {
				progress = true
			} else {
				still = append(still, p)
			}
		}
		deferred = still
	}
	for _, p := range deferred {
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.pod, Reason: s.explain(p)})
	}
	for _, ns := range s.nodes {
		if len(ns.placed) > 0 {
			plan.Existing = append(plan.Existing, Placement{Node: ns.node.Name, Pods: ns.placed})
		}
	}
	s.trimToLimits()
	var dropped []Unschedulable
	for _, c := range s.claims {
		nc, why, ok := s.finalize(c)
		if !ok {
			// Under Strict, a claim whose options (trimmed to the pool's
			// limits, cut to MaxInstanceTypeOptions) no longer meet a
			// minValues is not made: its pods wait.
			for _, p := range c.pods {
				dropped = append(dropped, Unschedulable{Pod: p.pod, Reason: fmt.Sprintf("NodePool %s: %s", c.pool.name, why)})
			}
			continue
		}
		plan.NodeClaims = append(plan.NodeClaims, nc)
	}
	return plan, dropped
}

// requiresPodAffinity: the pod has a required pod affinity term.
func requiresPodAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// trimToLimits keeps, for each claim of a limited pool, only the options that
// keep the pool within its limits whatever each launch picks: claim by claim,
// an option may use what the earlier claims' largest options and the later
// claims' charges (their cheapest candidates) leave. The charged candidate
// always fits, so no claim loses every option.
func (s *solver) trimToLimits() {
	for _, ps := range s.pools {
		if !ps.limited {
			continue
		}
		var mine []*claim
		for _, c := range s.claims {
			if c.pool == ps {
				mine = append(mine, c)
			}
		}
		// budget: the limits minus usage, i.e. remaining plus every charge.
		budget := ps.remaining
		for _, c := range mine {
			budget = budget.Plus(c.reserved)
		}
		later := make(resources.Vector, s.ix.Len())
		for _, c := range mine {
			later = later.Plus(c.reserved)
		}
		for _, c := range mine {
			later = later.Minus(c.reserved)
			room := budget.Minus(later)
			c.types = slices.DeleteFunc(c.types, func(t *typeState) bool { return !ps.fits(t.capacity, room) })
			largest, _ := envelope(c.types)
			budget = budget.Minus(largest)
		}
	}
}

// typicalMemPerCPU is the median memory per CPU of the instance types.
func typicalMemPerCPU(pools []*poolState) float64 {
	var ratios []float64
	for _, ps := range pools {
		for _, t := range ps.types {
			if cpu := t.allocatable.At(resources.CPU); cpu > 0 {
				ratios = append(ratios, float64(t.allocatable.At(resources.Memory))/float64(cpu)*1000)
			}
		}
	}
	if len(ratios) == 0 {
		return 4 << 30
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// daemonLabels are the labels a DaemonSet's required node affinity may ask
// of a node to come: the well-known ones, and those every node gets as it
// registers and initializes (karpenter.sh/registered, karpenter.sh/
// initialized), which no NodeClaim carries but its node will.
func daemonLabels(wellKnown map[string]bool) map[string]bool {
	out := maps.Clone(wellKnown)
	out[karpv1.LabelNodeRegistered] = true
	out[karpv1.LabelNodeInitialized] = true
	return out
}

// knownLabels: the input's well-known labels plus every key an instance type
// defines, since any node launched from that type will carry it.
func knownLabels(in Input) map[string]bool {
	base := in.WellKnownLabels
	if base == nil {
		base = WellKnownLabels()
	}
	out := maps.Clone(base)
	for _, np := range in.NodePools {
		for _, it := range np.InstanceTypes {
			for k := range it.Labels {
				out[k] = true
			}
		}
	}
	return out
}

// place puts the pod on the first node, claim or new claim that takes it.
func (s *solver) place(p *podState) bool {
	preqs := p.requirements()
	for _, ns := range s.nodes {
		if !ns.fits(p, preqs) {
			continue
		}
		if ns.unlaunched {
			reqs, ok := s.admit(ns, p, preqs)
			if !ok {
				continue
			}
			ns.reqs = reqs
			ns.place(p)
			s.record(p, ns.domainsOf)
			return true
		}
		if s.nodeAllows(p, ns.node) {
			ns.place(p)
			s.record(p, func(key string) []string {
				if d, ok := nodeDomain(ns.node, key); ok {
					return []string{d}
				}
				return nil
			})
			return true
		}
	}
	if c, cand := s.bestClaim(p, preqs); c != nil {
		s.unindexClaim(c)
		c.commit(p, cand)
		s.indexClaim(c)
		s.record(p, c.domainsOf)
		return true
	}
	for _, ps := range s.pools {
		if c := s.newClaim(ps, p, preqs); c != nil {
			s.claims = append(s.claims, c)
			s.claimByHost[c.hostname] = c
			s.indexClaim(c)
			s.record(p, c.domainsOf)
			return true
		}
	}
	return false
}

// slack is the room a type would have left, in units of the catalog's
// typical node shape (one CPU and its share of memory), over the two
// dimensions that drive price.
func (s *solver) slack(allocatable, requests resources.Vector) float64 {
	cpu := float64(allocatable.At(resources.CPU)-requests.At(resources.CPU)) / 1000
	mem := float64(allocatable.At(resources.Memory)-requests.At(resources.Memory)) / s.memPerCPU
	return cpu + mem
}

// newClaim opens a NodeClaim from the pool for the pod, or returns nil.
func (s *solver) newClaim(ps *poolState, p *podState, preqs requirement.Requirements) *claim {
	if ps.invalid != nil {
		return nil
	}
	if _, bad := untolerated(ps.taints, p.tolerations); bad {
		return nil
	}
	if ps.reqs.Compatible(preqs, s.wellKnown) != nil || portsConflict(ps.daemonPorts, p.ports) {
		return nil
	}
	reqs := ps.reqs.Clone()
	reqs.AddAll(preqs)
	hostname := fmt.Sprintf("%s%04d", placeholderPrefix, s.hostnames)
	types, reqs, ok := s.fitTypes(p, ps.types, ps.reqs, reqs, p.requests, hostname, func(t *typeState) bool { return !ps.limited || ps.withinLimits(t.capacity) })
	if !ok {
		return nil
	}
	s.hostnames++
	c := &claim{seq: s.hostnames, pool: ps, hostname: hostname, reqs: reqs, requests: slices.Clone(p.requests), types: slices.Clone(types), pods: []*podState{p},
		ports: append(slices.Clone(ps.daemonPorts), p.ports...)}
	_, c.maxAlloc = envelope(types)
	if ps.limited {
		c.reserved = types[0].capacity
		ps.remaining = ps.remaining.Minus(c.reserved)
		if ps.nodesLeft > 0 {
			ps.nodesLeft--
		}
	}
	return c
}

// finalize turns a claim into the NodeClaim to create. Its options must
// meet every minValues: under Strict a claim short of one is not made
// (false, and why); under BestEffort the requirement carries the number of
// values reached instead, as Karpenter rewrites it, and the claim is marked
// relaxed.
func (s *solver) finalize(c *claim) (NodeClaim, string, bool) {
	type option struct {
		t *typeState
		o catalog.Offering
	}
	opts := make([]option, 0, len(c.types))
	admits := offeringFilter(c.reqs)
	for _, t := range c.types {
		if o, ok := t.cheapest(admits); ok {
			opts = append(opts, option{t, o})
		}
	}
	slices.SortStableFunc(opts, func(a, b option) int {
		if c := cmp.Compare(a.o.Price, b.o.Price); c != 0 {
			return c
		}
		return cmp.Compare(a.t.it.Name, b.t.it.Name)
	})
	if len(opts) > MaxInstanceTypeOptions {
		opts = opts[:MaxInstanceTypeOptions]
	}
	names := make([]string, 0, len(opts))
	var cts []string
	for _, o := range opts {
		names = append(names, o.t.it.Name)
		for _, off := range o.t.offerings {
			if admits(off) {
				cts = append(cts, off.CapacityType)
			}
		}
	}
	if len(opts) == 0 {
		return NodeClaim{}, "no instance type option is left within the pool's limits", false
	}
	reqs := c.reqs.Clone()
	reqs.Add(requirement.MustNew(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	reqs.Add(requirement.MustNew(karpv1.LabelCapacityType, corev1.NodeSelectorOpIn, cts...))
	relaxed := false
	if mins := c.reqs.MinValues(); len(mins) > 0 {
		final := make([]*typeState, len(opts))
		for i, o := range opts {
			final[i] = o.t
		}
		reached := minValuesReached(c.reqs, final)
		for _, key := range slices.Sorted(maps.Keys(mins)) {
			if reached[key] >= mins[key] {
				continue
			}
			if s.in.MinValuesPolicy != MinValuesBestEffort {
				return NodeClaim{}, fmt.Sprintf("minValues: %s needs %d distinct values, the instance types left within the pool's limits offer %d", key, mins[key], reached[key]), false
			}
			reqs.SetMinValues(key, reached[key])
			relaxed = true
		}
	}
	best := opts[0]
	pods := make([]*corev1.Pod, 0, len(c.pods))
	for _, p := range c.pods {
		pods = append(pods, p.pod)
	}
	return NodeClaim{
		NodePool:            c.pool.name,
		Requirements:        reqs.NodeSelectorRequirements(),
		InstanceTypeOptions: names,
		InstanceType:        best.t.it.Name,
		Zone:                best.o.Zone,
		CapacityType:        best.o.CapacityType,
		Price:               best.o.Price,
		MinValuesRelaxed:    relaxed,
		Pods:                pods,
		Requests:            s.ix.ResourceList(c.requests.Plus(best.t.overhead)),
	}, "", true
}
