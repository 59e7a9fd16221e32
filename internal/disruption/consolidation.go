package disruption

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// Underutilized is consolidation. First by deletion: it takes, fewest pods
// first, the consolidatable nodes of pools with policy
// WhenEmptyOrUnderutilized whose pods, together with those of the nodes
// taken before, fit on the nodes that stay (as the solver places them:
// resources, affinity, spread, taints, volumes), within each pool's budget
// for Underutilized. When no node can simply go, it replaces one node with
// one cheaper NodeClaim (see replacement), the first in the same order that
// allows it. cluster is every node and in-flight NodeClaim with its pods
// (state's snapshot; only initialized nodes receive pods); pools are the
// NodePools with their instance types; base carries namespaces, storage
// and DaemonSet pods for the solver.
func Underutilized(cands []Candidate, cluster []sched.Node, pools []sched.NodePool, base sched.Input, policy Policy, now time.Time) (Decision, error) {
	d := Decision{Command: Command{Reason: karpv1.DisruptionReasonUnderutilized}, Stays: map[string]string{}}
	members, disrupting := PoolCounts(cands)
	var eligible []Candidate
	for _, c := range cands {
		if Disrupting(c) {
			continue
		}
		if why := Blocked(c, now); why != "" {
			d.Stays[c.Name()] = why
			continue
		}
		if c.PoolStarting {
			d.Stays[c.Name()] = fmt.Sprintf("NodePool %s has NodeClaims starting: consolidation waits for them", c.NodePool.Name)
			continue
		}
		switch c.NodePool.Spec.Disruption.ConsolidationPolicy {
		case karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, karpv1.ConsolidationPolicyBalanced:
		default:
			if !Empty(c) {
				d.Stays[c.Name()] = fmt.Sprintf("consolidationPolicy %s and the node is not empty", c.NodePool.Spec.Disruption.ConsolidationPolicy)
			}
			continue
		}
		if ok, why, _ := Consolidatable(c.NodeClaim, c.NodePool, now); !ok {
			d.Stays[c.Name()] = why
			continue
		}
		if age := now.Sub(c.NodeClaim.CreationTimestamp.Time); age < policy.MinAge {
			d.Stays[c.Name()] = fmt.Sprintf("it is %s old, younger than the minimum age for consolidation (%s)", age.Round(time.Second), policy.MinAge)
			continue
		}
		eligible = append(eligible, c)
	}
	d.Eligible = len(eligible)
	moves := make(map[string]int, len(eligible))
	for _, c := range eligible {
		moves[c.Name()] = len(Reschedulable(c.Pods))
	}
	slices.SortStableFunc(eligible, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(moves[a.Name()], moves[b.Name()]),
			a.NodeClaim.CreationTimestamp.Compare(b.NodeClaim.CreationTimestamp.Time), cmp.Compare(a.Name(), b.Name()))
	})
	left, explain, err := budgetsLeft(eligible, karpv1.DisruptionReasonUnderutilized, members, disrupting, now)
	if err != nil {
		return Decision{}, err
	}
	if base.RequestsOf == nil {
		base.RequestsOf = NewRequestMemo().Of
	}
	// Deletion: one session over the nodes that can take pods; each
	// candidate in turn is drained into the nodes left, kept when every pod
	// finds a place and reverted otherwise.
	in := base
	in.Nodes = receivers(cluster)
	order := make([]string, 0, len(eligible))
	for _, c := range eligible {
		order = append(order, c.Node.Name)
	}
	session := sched.NewSession(in, order, func(p *corev1.Pod) bool { return !ownedByNodeOrDaemonSet(p) })
	for _, c := range eligible {
		pool := c.NodePool.Name
		if left[pool] <= 0 {
			d.Stays[c.Name()] = fmt.Sprintf("the disruption budget is spent: %s, %d disrupting", explain[pool], disrupting[pool])
			continue
		}
		if u := session.Drain(c.Node.Name); u != nil {
			if u.Pod == nil { // the node is not one the solver's snapshot lets take part
				d.Stays[c.Name()] = u.Reason
			} else {
				d.Stays[c.Name()] = fmt.Sprintf("pod %s/%s would have no place on the other nodes: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
			}
			continue
		}
		left[pool]--
		d.Command.Candidates = append(d.Command.Candidates, c)
	}
	if len(d.Command.Candidates) > 0 {
		return d, nil
	}
	if group, planned, ok := multiNode(eligible[:min(len(eligible), maxProbes)], cluster, pools, base, policy, left); ok {
		for _, c := range group {
			delete(d.Stays, c.Name())
		}
		d.Command.Candidates, d.Command.Replacements = group, []sched.NodeClaim{planned}
		return d, nil
	}
	for i, c := range eligible {
		if left[c.NodePool.Name] <= 0 || i >= maxReplaceProbes {
			continue
		}
		planned, why := replacement([]Candidate{c}, others(cluster, nil, c), pools, base, policy)
		if why != "" {
			d.Stays[c.Name()] = "it cannot simply go, and no replacement: " + why
			continue
		}
		delete(d.Stays, c.Name())
		d.Command.Candidates, d.Command.Replacements = []Candidate{c}, []sched.NodeClaim{planned}
		break
	}
	return d, nil
}

// Bounds on one round's work, like Karpenter's consolidation timeouts:
// deletion asks every eligible node (each question is a cheap session
// drain); a multi-node merge takes at most maxMultiNode nodes (Karpenter's
// 100) from the first maxProbes eligible ones, and replacement is tried on
// at most maxReplaceProbes nodes. The rest wait for the next round (10 s
// later).
const (
	maxMultiNode     = 100
	maxProbes        = 10
	maxReplaceProbes = 3
)

// multiNode looks for the longest run of eligible candidates (in order, at
// least two, within their pools' budgets) whose pods fit, with the other
// nodes' room, on one new NodeClaim cheaper than all of them together:
// many nodes merged into one. Longer runs are tried by binary search.
func multiNode(eligible []Candidate, cluster []sched.Node, pools []sched.NodePool, base sched.Input, policy Policy, left map[string]int) ([]Candidate, sched.NodeClaim, bool) {
	var run []Candidate
	budget := maps.Clone(left)
	priced := func(c Candidate) bool {
		_, ok := CandidatePrice(c, pools)
		return ok
	}
	for _, c := range eligible {
		// A node whose offering has no known price cannot be weighed
		// against a replacement (its instance type is gone from its pool).
		if len(run) == maxMultiNode || !policy.SpotToSpot && c.NodeClaim.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeSpot || !priced(c) {
			continue
		}
		if budget[c.NodePool.Name] > 0 {
			budget[c.NodePool.Name]--
			run = append(run, c)
		}
	}
	try := func(n int) (sched.NodeClaim, bool) {
		group := run[:n]
		gone := map[string]bool{}
		for _, c := range group {
			gone[c.Name()] = true
			if c.Node != nil {
				gone[c.Node.Name] = true
			}
		}
		planned, why := replacement(group, others(cluster, gone, group[0]), pools, base, policy)
		return planned, why == ""
	}
	lo, hi := 2, len(run)
	var best sched.NodeClaim
	found := 0
	for lo <= hi {
		mid := (lo + hi) / 2
		if planned, ok := try(mid); ok {
			best, found, lo = planned, mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if found == 0 {
		return nil, sched.NodeClaim{}, false
	}
	return run[:found], best, true
}

// receivers are the nodes that can take pods: initialized and staying.
// Capacity still starting is left out: pods moved onto it would wait, and
// provisioning would buy for them again.
func receivers(cluster []sched.Node) []sched.Node {
	var out []sched.Node
	for _, n := range cluster {
		if !n.MarkedForDeletion && !n.InFlight && n.Initialized {
			out = append(out, n)
		}
	}
	return out
}

// others are the nodes that would take c's pods: initialized, staying, not
// c. Capacity still starting is left out: pods moved onto it would wait,
// and provisioning would buy for them again.
func others(cluster []sched.Node, removed map[string]bool, c Candidate) []sched.Node {
	var out []sched.Node
	for _, n := range receivers(cluster) {
		if removed[n.Name] || n.Name == c.NodeClaim.Name || c.Node != nil && n.Name == c.Node.Name {
			continue
		}
		out = append(out, n)
	}
	return out
}

// Reschedulable are the pods that would need a place elsewhere: not
// DaemonSet or mirror pods.
func Reschedulable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !ownedByNodeOrDaemonSet(p) {
			out = append(out, p)
		}
	}
	return out
}
