package sched

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// nodeState is an existing node or in-flight claim with the room it has left.
type nodeState struct {
	node      *Node
	available resources.Vector
	taints    []corev1.Taint
	placed    []*corev1.Pod
	ports     []hostPort
	// gone: a Session took the node away.
	gone bool
	// unlaunched: the node is a NodeClaim not launched yet (Node.Requirements
	// set); reqs is what its node may still turn out to be: the claim's
	// requirements and labels, narrowed by every pod placed on it. A claim
	// whose requirements cannot be read takes no pods (invalid).
	unlaunched bool
	reqs       requirement.Requirements
	invalid    error
}

func (s *solver) prepareNode(n *Node) *nodeState {
	ns := &nodeState{node: n, available: s.ix.Vector(n.Allocatable), taints: n.Taints}
	for _, p := range n.Pods {
		ns.available = ns.available.Minus(s.ix.PodRequests(p))
		if !ignoredForTopology(p) {
			ns.ports = append(ns.ports, hostPorts(p)...)
		}
	}
	if n.NodePool != "" && !n.Initialized {
		ns.taints = slices.DeleteFunc(slices.Clone(n.Taints), func(t corev1.Taint) bool {
			return isEphemeralTaint(t) || slices.ContainsFunc(n.StartupTaints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })
		})
	}
	if len(n.Requirements) > 0 {
		s.prepareUnlaunched(ns)
	}
	return ns
}

// isEphemeralTaint: taints a starting node carries until it is ready.
func isEphemeralTaint(t corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", karpv1.TaintKeyUnregistered:
		return true
	}
	return strings.HasPrefix(t.Key, "readiness.k8s.io/")
}

// fits reports whether the pod can go on the node now: for a NodeClaim not
// launched yet, whether its node can still be one the pod accepts.
func (ns *nodeState) fits(p *podState, preqs requirement.Requirements) bool {
	if ns.gone || ns.invalid != nil || ns.node.MarkedForDeletion || !p.requests.Fits(ns.available) || portsConflict(ns.ports, p.ports) {
		return false
	}
	if _, bad := untolerated(ns.taints, p.tolerations); bad {
		return false
	}
	if ns.unlaunched {
		// As Karpenter's in-flight nodes: a key the pod constrains must be
		// one the claim constrains too (or one the pod allows absent), and
		// the two must intersect. A value the claim leaves open is no
		// mismatch; placing the pod settles it (admit).
		return ns.reqs.Compatible(preqs, nil) == nil
	}
	return preqs.Matches(ns.node.Labels) == nil
}

func (ns *nodeState) place(p *podState) {
	ns.available = ns.available.Minus(p.requests)
	ns.placed = append(ns.placed, p.pod)
	ns.ports = append(ns.ports, p.ports...)
}

// sortNodes: registered and initialized nodes first, then starting ones, then
// in-flight claims; by name within each.
func sortNodes(nodes []*nodeState) {
	rank := func(n *Node) int {
		switch {
		case n.InFlight:
			return 2
		case n.NodePool != "" && !n.Initialized:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(nodes, func(a, b *nodeState) int {
		if c := cmp.Compare(rank(a.node), rank(b.node)); c != 0 {
			return c
		}
		return cmp.Compare(a.node.Name, b.node.Name)
	})
}
