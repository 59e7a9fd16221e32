package disruption

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Policy holds the consolidation safeguards Nodewright adds to Karpenter's.
type Policy struct {
	// MinSavings is the least fraction of a node's price a replacement must
	// save (0.1: at most 90 % of it); smaller savings are not worth the
	// disruption.
	MinSavings float64
	// MinAge: nodes younger than this are not consolidated (emptiness
	// excepted), so a node is not replaced while its workload settles.
	MinAge time.Duration
	// SpotToSpot allows replacing spot nodes by cheaper spot nodes
	// (Karpenter's SpotToSpotConsolidation feature gate, off by default):
	// a single node only when at least MinSpotToSpotOptions cheaper types
	// fit, launched from the cheapest of them.
	SpotToSpot bool
}

// MinSpotToSpotOptions is how many cheaper instance types a single spot
// node's replacement must have to choose from (Karpenter's 15), so spot
// consolidation does not chase the one cheapest, most interrupted pool.
const MinSpotToSpotOptions = 15

// DefaultPolicy: replace only for at least 10 % savings; no minimum age
// beyond consolidateAfter.
var DefaultPolicy = Policy{MinSavings: 0.1}

// replacement plans one NodeClaim to take the pods of cands (the other
// nodes keep theirs): only offerings priced under (1-MinSavings) × the
// candidates' total price, of an instance type none of them runs, in the
// candidates' NodePools. Spot nodes are not replaced (spot-to-spot
// consolidation is off, as in Karpenter by default); a replacement that
// may be spot is made spot.
func replacement(cands []Candidate, others []sched.Node, pools []sched.NodePool, base sched.Input, policy Policy) (sched.NodeClaim, string) {
	total := 0.0
	own := map[string]bool{}
	inPools := map[string]bool{}
	var pods []*corev1.Pod
	allSpot := allSpot(cands)
	if allSpot && !policy.SpotToSpot {
		return sched.NodeClaim{}, spotToSpotOff
	}
	for _, c := range cands {
		labels := c.NodeClaim.Labels
		pool := poolNamed(pools, c.NodePool.Name)
		if pool == nil {
			return sched.NodeClaim{}, "its NodePool's instance types are unknown"
		}
		price, ok := priceOf(labels, pool.InstanceTypes)
		if !ok {
			return sched.NodeClaim{}, fmt.Sprintf("the price of %s is unknown", labels[corev1.LabelInstanceTypeStable])
		}
		total += price
		own[labels[corev1.LabelInstanceTypeStable]] = true
		inPools[c.NodePool.Name] = true
		pods = append(pods, Reschedulable(c.Pods)...)
	}
	limit := total * (1 - policy.MinSavings)
	var cheaper []sched.NodePool
	for _, pool := range pools {
		if !inPools[pool.Name] {
			continue
		}
		np := sched.NodePool{NodePool: pool.NodePool, Usage: pool.Usage}
		for _, it := range pool.InstanceTypes {
			if own[it.Name] {
				continue
			}
			var offs []catalog.Offering
			for _, o := range it.Offerings {
				if o.Price < limit && (!allSpot || o.CapacityType == karpv1.CapacityTypeSpot) {
					offs = append(offs, o)
				}
			}
			if len(offs) > 0 {
				cp := *it
				cp.Offerings = offs
				np.InstanceTypes = append(np.InstanceTypes, &cp)
			}
		}
		cheaper = append(cheaper, np)
	}
	in := base
	in.Pods, in.Nodes, in.NodePools = pods, others, cheaper
	plan := sched.Solve(in)
	switch {
	case len(plan.Unschedulable) > 0:
		return sched.NodeClaim{}, fmt.Sprintf("no instance type at least %.0f%% cheaper than $%.4f/h fits its pods", 100*policy.MinSavings, total)
	case len(plan.NodeClaims) != 1:
		return sched.NodeClaim{}, fmt.Sprintf("its pods would need %d new nodes", len(plan.NodeClaims))
	}
	planned := plan.NodeClaims[0]
	if planned.CapacityType == karpv1.CapacityTypeSpot {
		planned.Requirements = withCapacityType(planned.Requirements, karpv1.CapacityTypeSpot)
	}
	if allSpot && len(cands) == 1 {
		if n := len(planned.InstanceTypeOptions); n < MinSpotToSpotOptions {
			return sched.NodeClaim{}, fmt.Sprintf("spot-to-spot consolidation needs %d cheaper instance types that fit, got %d", MinSpotToSpotOptions, n)
		}
		planned = cheapestOptions(planned, MinSpotToSpotOptions)
	}
	return planned, ""
}

// spotToSpotOff says why spot nodes are not replaced.
const spotToSpotOff = "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)"

// cheapestOptions keeps a NodeClaim's n cheapest instance-type options
// (they come cheapest first), in its requirement too.
func cheapestOptions(nc sched.NodeClaim, n int) sched.NodeClaim {
	nc.InstanceTypeOptions = slices.Clone(nc.InstanceTypeOptions[:n])
	reqs := slices.Clone(nc.Requirements)
	for i, r := range reqs {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			r.Values = slices.DeleteFunc(slices.Clone(r.Values), func(v string) bool { return !slices.Contains(nc.InstanceTypeOptions, v) })
			reqs[i] = r
		}
	}
	nc.Requirements = reqs
	return nc
}

// poolNamed finds a pool by name, or nil.
func poolNamed(pools []sched.NodePool, name string) *sched.NodePool {
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	return nil
}

// CandidatePrice is the price of the candidate's offering among its pool's
// instance types, and false when its pool or offering is unknown.
func CandidatePrice(c Candidate, pools []sched.NodePool) (float64, bool) {
	pool := poolNamed(pools, c.NodePool.Name)
	if pool == nil {
		return 0, false
	}
	return priceOf(c.NodeClaim.Labels, pool.InstanceTypes)
}

// priceOf is the price of the offering a node's labels name.
func priceOf(labels map[string]string, types []*catalog.InstanceType) (float64, bool) {
	for _, it := range types {
		if it.Name != labels[corev1.LabelInstanceTypeStable] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == labels[corev1.LabelTopologyZone] && o.CapacityType == labels[karpv1.LabelCapacityType] {
				return o.Price, true
			}
		}
	}
	return 0, false
}

// withCapacityType pins the capacity-type requirement to ct.
func withCapacityType(reqs []karpv1.NodeSelectorRequirementWithMinValues, ct string) []karpv1.NodeSelectorRequirementWithMinValues {
	out := slices.DeleteFunc(slices.Clone(reqs), func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.Key == karpv1.LabelCapacityType })
	return append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{ct}})
}
