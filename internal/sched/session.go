package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/sched/resources"
)

// Session answers "could this node go, its pods moving to the nodes that
// stay?" many times over one cluster without solving from scratch each
// time: the solver's state (room left per node, host ports, topology
// counts, pods' relaxation) is built once, and every change a question
// makes is journaled so that a failed question is reverted in place
// (fork/revert, no copies per candidate). A question that succeeds is
// kept, so the next one sees its pods where they moved.
//
// Pods move only onto the session's existing nodes (no NodePools): a
// Session plans deletions; replacements are Solve's.
type Session struct {
	s *solver
	// byName finds a node; order is where moved pods look for room: nodes
	// that are not candidates first, then candidates last-to-go first, so
	// that pods do not move onto a node about to be asked to go itself.
	byName map[string]*nodeState
	order  []*nodeState
	// pods: the movable pods of the candidate nodes, prepared; pristine is
	// each one unrelaxed, for a fresh start every time it moves.
	pods      map[*corev1.Pod]*podState
	candidate map[string]bool
	pristine  map[*podState]podState
	// eligible caches each unrelaxed pod's reachable domains per group.
	eligible map[any]map[*topoGroup][]string
	journal  []func()
	// freeCPU and freeMem add up the room of the nodes still present, for
	// a quick no when the pods of a node cannot fit anywhere together.
	freeCPU, freeMem int64
}

// NewSession prepares in.Nodes (which must include the candidates, by node
// name, in the order they will be asked about) for questions; movable says
// which pods need a place when their node goes (others, such as DaemonSet
// pods, go with it). in.Pods and in.NodePools are ignored.
func NewSession(in Input, candidates []string, movable func(*corev1.Pod) bool) *Session {
	in.Pods, in.NodePools = nil, nil
	s := &solver{in: in, ix: resources.NewIndex(), wellKnown: knownLabels(in), claimByHost: map[string]*claim{}}
	s.daemonKnown = daemonLabels(s.wellKnown)
	s.ix.RequestsOf = in.RequestsOf
	s.memPerCPU = typicalMemPerCPU(nil)
	x := &Session{s: s, byName: map[string]*nodeState{}, pods: map[*corev1.Pod]*podState{}, candidate: map[string]bool{}, eligible: map[any]map[*topoGroup][]string{}, pristine: map[*podState]podState{}}
	for i := range in.Nodes {
		ns := s.prepareNode(&in.Nodes[i])
		s.nodes = append(s.nodes, ns)
		x.byName[ns.node.Name] = ns
		x.freeCPU += max(ns.available.At(resources.CPU), 0)
		x.freeMem += max(ns.available.At(resources.Memory), 0)
	}
	sortNodes(s.nodes)
	rank := map[string]int{}
	var pods []*podState
	for i, name := range candidates {
		ns, ok := x.byName[name]
		if !ok {
			continue
		}
		rank[name] = i + 1
		x.candidate[name] = true
		for _, p := range ns.node.Pods {
			if !movable(p) || x.pods[p] != nil {
				continue
			}
			ps := newPodState(p, s.ix)
			x.pods[p] = ps
			pods = append(pods, ps)
		}
	}
	volumes := newVolumeIndex(in)
	for _, ps := range pods {
		if ps.invalid == nil {
			volumes.applyVolumes(ps)
		}
	}
	s.setupTopology(pods)
	for _, ps := range pods {
		x.pristine[ps] = *ps
	}
	x.orderNodes(rank)
	return x
}

// orderNodes sets where moved pods look for room: nodes that are not
// candidates first (in the solver's order), then candidates last-to-go
// first; rank is each candidate's place in the asking order, from 1.
func (x *Session) orderNodes(rank map[string]int) {
	x.order = slices.Clone(x.s.nodes)
	slices.SortStableFunc(x.order, func(a, b *nodeState) int {
		return cmp.Compare(-rank[a.node.Name], -rank[b.node.Name])
	})
	// Non-candidates (rank 0) sort after every candidate by the above;
	// move them to the front, keeping their order.
	slices.SortStableFunc(x.order, func(a, b *nodeState) int {
		return cmp.Compare(min(rank[a.node.Name], 1), min(rank[b.node.Name], 1))
	})
}

// Reorder has the candidates asked in another order from now on, as if
// the session had been made with it: one session then serves several
// orders (Revert to Mark 0 between them) instead of being prepared again
// for each. Names that are not candidates are ignored. It panics unless
// the session is as it was made: no change kept.
func (x *Session) Reorder(candidates []string) {
	if len(x.journal) != 0 {
		panic("sched: Session.Reorder after a change: Revert first")
	}
	rank := map[string]int{}
	for i, name := range candidates {
		if x.candidate[name] {
			rank[name] = i + 1
		}
	}
	x.orderNodes(rank)
}

// Drain asks whether the node can go: it is taken away and its movable pods
// (those it started with and any moved onto it earlier) are placed on the
// nodes left. On success the change is kept and nil returned; otherwise the
// session is as it was and the first pod without a place is returned with
// the reason. A node already gone can go; a node that is not one of the
// session's candidates cannot (the failure names no pod).
func (x *Session) Drain(name string) *Unschedulable {
	ns := x.byName[name]
	switch {
	case !x.candidate[name]:
		return &Unschedulable{Reason: fmt.Sprintf("node %s is not a candidate of this session", name)}
	case ns.gone:
		return nil
	}
	mark := len(x.journal)
	var moving []*podState
	var cpu, mem int64
	for _, p := range ns.node.Pods {
		x.uncount(p, ns)
		if ps := x.pods[p]; ps != nil {
			moving = append(moving, ps)
			cpu += ps.requests.At(resources.CPU)
			mem += ps.requests.At(resources.Memory)
		}
	}
	for _, p := range ns.placed {
		x.uncount(p, ns)
		ps := x.pods[p]
		moving = append(moving, ps)
		cpu += ps.requests.At(resources.CPU)
		mem += ps.requests.At(resources.Memory)
	}
	x.setGone(ns)
	if cpu > x.freeCPU || mem > x.freeMem {
		x.Revert(mark)
		p := moving[0].pod
		return &Unschedulable{Pod: p, Reason: "the nodes left do not have the CPU or memory free for the pods of this node together"}
	}
	sortPods(moving, x.s.memPerCPU)
	for _, ps := range moving {
		if !x.move(ps) {
			u := &Unschedulable{Pod: ps.pod, Reason: x.explain(ps)}
			x.Revert(mark)
			return u
		}
	}
	return nil
}

// Gone reports whether a Drain took the node.
func (x *Session) Gone(name string) bool {
	ns, ok := x.byName[name]
	return ok && ns.gone
}

// Mark is the point Revert returns to.
func (x *Session) Mark() int { return len(x.journal) }

// Revert undoes every change since mark.
func (x *Session) Revert(mark int) {
	for i := len(x.journal) - 1; i >= mark; i-- {
		x.journal[i]()
	}
	x.journal = x.journal[:mark]
}

// move places a pod on the first node left (in the session's order) that
// takes it, relaxing preferences as Solve does, starting unrelaxed.
func (x *Session) move(ps *podState) bool {
	was := *ps
	x.journal = append(x.journal, func() { *ps = was })
	*ps = x.pristine[ps]
	// The domains an unrelaxed pod can reach are the same every time it
	// moves (a node that went still counts its domain, which can only make
	// a spread stricter), and the same for every pod of one controller
	// (one template: same node affinity and tolerations), so they are kept
	// across moves and shared between replicas.
	key := any(ps)
	if ref := metav1.GetControllerOf(ps.pod); ref != nil && ref.UID != "" {
		key = ref.UID
	}
	if x.eligible[key] == nil {
		x.eligible[key] = map[*topoGroup][]string{}
	}
	ps.eligible = x.eligible[key]
	if ps.invalid != nil {
		return false
	}
	for {
		preqs := ps.requirements()
		for _, ns := range x.order {
			// A NodeClaim not launched yet is no place to move pods to: it may
			// never come.
			if ns.gone || ns.unlaunched || !ns.fits(ps, preqs) || !x.s.nodeAllows(ps, ns.node) {
				continue
			}
			x.placeOn(ps, ns)
			return true
		}
		if !ps.relax(false) {
			return false
		}
	}
}

func (x *Session) placeOn(ps *podState, ns *nodeState) {
	available, placed, ports := ns.available, ns.placed, ns.ports
	cpu, mem := ps.requests.At(resources.CPU), ps.requests.At(resources.Memory)
	x.journal = append(x.journal, func() {
		ns.available, ns.placed, ns.ports = available, placed, ports
		x.freeCPU += cpu
		x.freeMem += mem
	})
	ns.place(ps)
	x.freeCPU -= cpu
	x.freeMem -= mem
	x.s.record(ps, func(key string) []string {
		if d, ok := nodeDomain(ns.node, key); ok {
			return []string{d}
		}
		return nil
	})
	x.journal = append(x.journal, func() { x.count(ps.pod, ns, -1) })
}

func (x *Session) setGone(ns *nodeState) {
	cpu, mem := max(ns.available.At(resources.CPU), 0), max(ns.available.At(resources.Memory), 0)
	ns.gone = true
	x.freeCPU -= cpu
	x.freeMem -= mem
	x.journal = append(x.journal, func() {
		ns.gone = false
		x.freeCPU += cpu
		x.freeMem += mem
	})
}

// uncount takes a pod on a node out of the topology counts, journaled.
func (x *Session) uncount(p *corev1.Pod, ns *nodeState) {
	if ignoredForTopology(p) {
		return
	}
	x.count(p, ns, -1)
	x.journal = append(x.journal, func() { x.count(p, ns, 1) })
}

// count adds delta to the counts of every group selecting the pod in the
// node's domain, and to the owners of the pod's required anti-affinity.
func (x *Session) count(p *corev1.Pod, ns *nodeState, delta int32) {
	if ignoredForTopology(p) {
		return
	}
	for _, g := range x.s.topo.groups {
		if d, ok := nodeDomain(ns.node, g.key); ok && g.selects(p) {
			g.counts[d] += delta
			g.selected += delta
		}
	}
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return
	}
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		g, err := x.s.topo.affinityGroup(p, topoAntiAffinity, term)
		if err != nil {
			continue
		}
		if d, ok := nodeDomain(ns.node, g.key); ok {
			g.owners[d] += delta
		}
	}
}

// explain says why no node left takes the pod: how many nodes each first
// obstacle rules out.
func (x *Session) explain(ps *podState) string {
	var room, taint, labels, topo, ports int
	preqs := ps.requirements()
	for _, ns := range x.order {
		switch {
		case ns.gone || ns.node.MarkedForDeletion:
		case !ps.requests.Fits(ns.available):
			room++
		case portsConflict(ns.ports, ps.ports):
			ports++
		case func() bool { _, bad := untolerated(ns.taints, ps.tolerations); return bad }():
			taint++
		case preqs.Matches(ns.node.Labels) != nil:
			labels++
		default:
			topo++ // what is left is the pod's topology (not checked again: costly)
		}
	}
	var parts []string
	for _, r := range []struct {
		n    int
		what string
	}{{room, "too little room"}, {ports, "host port taken"}, {taint, "taint not tolerated"}, {labels, "node affinity or selector not met"}, {topo, "topology spread or pod (anti-)affinity"}} {
		if r.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", r.n, r.what))
		}
	}
	if len(parts) == 0 {
		return "no other node is left"
	}
	return "no other node takes it: " + strings.Join(parts, ", ")
}
