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

// Underutilized is consolidation. First by deletion: it takes the
// consolidatable nodes of pools with policy WhenEmptyOrUnderutilized whose
// pods, together with those of the nodes taken before, fit on the nodes
// that stay (as the solver places them: resources, affinity, spread,
// taints, volumes), within each pool's budget for Underutilized, all in
// one command; which nodes go is chosen so that what stays costs least
// (see planDeletion). When no node can simply go, it merges a run of nodes
// onto one cheaper NodeClaim (see multiNode), else replaces one node with
// one cheaper NodeClaim (see replacement), fewest pods first. cluster is
// every node and in-flight NodeClaim with its pods (state's snapshot; only
// initialized nodes receive pods); pools are the NodePools with their
// instance types; base carries namespaces, storage and DaemonSet pods for
// the solver.
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
	// Deletion: the nodes that can simply go, chosen so that what stays
	// costs least (see planDeletion), all in this one command.
	del := planDeletion(eligible, cluster, pools, base, left, explain, disrupting)
	maps.Copy(d.Stays, del.stays)
	d.Command.Candidates = del.taken
	if len(d.Command.Candidates) > 0 {
		return d, nil
	}
	if group, planned, ok := multiNode(eligible, cluster, pools, base, policy, left); ok {
		for _, c := range group {
			delete(d.Stays, c.Name())
		}
		d.Command.Candidates, d.Command.Replacements = group, []sched.NodeClaim{planned}
		return d, nil
	}
	probes := 0
	for _, c := range eligible {
		if left[c.NodePool.Name] <= 0 || probes >= maxReplaceProbes {
			continue
		}
		if !policy.SpotToSpot && c.NodeClaim.Labels[karpv1.LabelCapacityType] == karpv1.CapacityTypeSpot {
			// Not a probe: a spot node alone is never replaced with the gate off.
			d.Stays[c.Name()] = "it cannot simply go, and no replacement: " + spotToSpotOff
			continue
		}
		probes++
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
// deletion asks every eligible node in each of its orders (each question
// is a cheap session drain); a multi-node merge takes at most
// maxMultiNode nodes (Karpenter's 100), the first eligible ones that are
// priced and within budget; and single-node replacement is tried on at
// most maxReplaceProbes nodes that may be replaced. The rest wait for the
// next round (10 s later).
const (
	maxMultiNode     = 100
	maxReplaceProbes = 3
)

// multiNode looks for the longest run of eligible candidates (in order, at
// least two, within their pools' budgets) whose pods fit, with the other
// nodes' room, on one new NodeClaim cheaper than all of them together:
// many nodes merged into one. Longer runs are tried by binary search, as
// Karpenter does, once the shortest one merges. Spot nodes are in the run: a group with an on-demand
// node may be replaced (the big spot node merged away with it); a group
// of spot nodes only is not, unless spot-to-spot consolidation is on
// (replacement says so).
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
		if len(run) == maxMultiNode || !priced(c) {
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
	// The shortest run that may be replaced is tried first: when it cannot
	// merge, longer runs are not searched (most rounds have nothing to
	// merge, and each try is a solve over the whole cluster).
	first := 2
	for !policy.SpotToSpot && first <= len(run) && allSpot(run[:first]) {
		first++
	}
	if first > len(run) {
		return nil, sched.NodeClaim{}, false
	}
	best, ok := try(first)
	if !ok {
		return nil, sched.NodeClaim{}, false
	}
	lo, hi, found := first+1, len(run), first
	for lo <= hi {
		mid := (lo + hi) / 2
		if planned, ok := try(mid); ok {
			best, found, lo = planned, mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	return run[:found], best, true
}

// allSpot: every candidate runs on spot.
func allSpot(cs []Candidate) bool {
	for _, c := range cs {
		if c.NodeClaim.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeSpot {
			return false
		}
	}
	return true
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
