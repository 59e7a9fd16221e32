package disruption

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// Command is a decision to disrupt candidates for a reason, launching
// replacements first when there are any.
type Command struct {
	Reason       karpv1.DisruptionReason
	Candidates   []Candidate
	Replacements []sched.NodeClaim
}

// Decision is a method's command and why every candidate it did not take
// stays, by NodeClaim name.
type Decision struct {
	Command Command
	Stays   map[string]string
	// Eligible counts the nodes the method could have taken, budgets
	// aside.
	Eligible int
}

// Emptiness takes the empty, consolidatable candidates of pools whose
// policy allows consolidating empty nodes (WhenEmpty, WhenEmptyOrUnderutilized,
// Balanced), oldest first, as far as each pool's budget for Empty allows.
// cands are all the NodeClaims of the pools (budgets count them all).
func Emptiness(cands []Candidate, now time.Time) (Decision, error) {
	d := Decision{Command: Command{Reason: karpv1.DisruptionReasonEmpty}, Stays: map[string]string{}}
	byPool := map[string][]Candidate{}
	for _, c := range cands {
		byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
	}
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	for _, pool := range pools {
		members := byPool[pool]
		np := members[0].NodePool
		disrupting := 0
		var empty []Candidate
		for _, c := range members {
			if Disrupting(c) {
				disrupting++
				continue
			}
			if why := Blocked(c, now); why != "" {
				d.Stays[c.Name()] = why
				continue
			}
			if !Empty(c) {
				d.Stays[c.Name()] = "it is not empty"
				continue
			}
			if ok, why, _ := Consolidatable(c.NodeClaim, np, now); !ok {
				d.Stays[c.Name()] = why
				continue
			}
			empty = append(empty, c)
		}
		d.Eligible += len(empty)
		if len(empty) == 0 {
			continue
		}
		allowed, explain, err := Allowed(np, karpv1.DisruptionReasonEmpty, len(members), disrupting, now)
		if err != nil {
			return Decision{}, err
		}
		slices.SortFunc(empty, func(a, b Candidate) int {
			return cmp.Or(a.NodeClaim.CreationTimestamp.Compare(b.NodeClaim.CreationTimestamp.Time), cmp.Compare(a.Name(), b.Name()))
		})
		for i, c := range empty {
			if i >= allowed {
				d.Stays[c.Name()] = fmt.Sprintf("the disruption budget is spent: %s, %d disrupting", explain, disrupting)
				continue
			}
			d.Command.Candidates = append(d.Command.Candidates, c)
		}
	}
	return d, nil
}

// budgetsLeft is, for the pool of each candidate in cs, how many more of
// its nodes its budgets for reason let go now, and which budget says so;
// members and disrupting are PoolCounts over all candidates.
func budgetsLeft(cs []Candidate, reason karpv1.DisruptionReason, members, disrupting map[string]int, now time.Time) (map[string]int, map[string]string, error) {
	left, explain := map[string]int{}, map[string]string{}
	for _, c := range cs {
		pool := c.NodePool.Name
		if _, ok := left[pool]; ok {
			continue
		}
		n, why, err := Allowed(c.NodePool, reason, members[pool], disrupting[pool], now)
		if err != nil {
			return nil, nil, err
		}
		left[pool], explain[pool] = n, why
	}
	return left, explain, nil
}

// PoolCounts counts each pool's NodeClaims and those of them being
// disrupted (budgets count both).
func PoolCounts(cands []Candidate) (members, disrupting map[string]int) {
	members, disrupting = map[string]int{}, map[string]int{}
	for _, c := range cands {
		members[c.NodePool.Name]++
		if Disrupting(c) {
			disrupting[c.NodePool.Name]++
		}
	}
	return members, disrupting
}

// Disrupting: the NodeClaim is being deleted or its node is tainted as
// being disrupted; it counts against budgets.
func Disrupting(c Candidate) bool {
	if c.NodeClaim.DeletionTimestamp != nil {
		return true
	}
	if c.Node == nil {
		return false
	}
	for _, t := range c.Node.Spec.Taints {
		if t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}
