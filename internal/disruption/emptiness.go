package disruption

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

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
// cands are all the NodeClaims of the pools (budgets count the
// initialized ones, see PoolCounts).
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
	counts, disrupting := PoolCounts(cands)
	for _, pool := range pools {
		members := byPool[pool]
		np := members[0].NodePool
		var empty []Candidate
		for _, c := range members {
			if Disrupting(c) {
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
		allowed, explain, err := Allowed(np, karpv1.DisruptionReasonEmpty, counts[pool], disrupting[pool], now)
		if err != nil {
			return Decision{}, err
		}
		slices.SortFunc(empty, func(a, b Candidate) int {
			return cmp.Or(a.NodeClaim.CreationTimestamp.Compare(b.NodeClaim.CreationTimestamp.Time), cmp.Compare(a.Name(), b.Name()))
		})
		for i, c := range empty {
			if i >= allowed {
				d.Stays[c.Name()] = fmt.Sprintf("the disruption budget is spent: %s, %d disrupting", explain, disrupting[pool])
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

// PoolCounts is each pool's budget base, as Karpenter counts it: members
// are the pool's managed nodes that are registered and initialized and
// whose instance is not terminating; disrupting are those of them already
// going (NotReady, being deleted, or marked by a disruption decision).
// Claims still launching or registering count for neither.
func PoolCounts(cands []Candidate) (members, disrupting map[string]int) {
	members, disrupting = map[string]int{}, map[string]int{}
	for _, c := range cands {
		if !counted(c) {
			continue
		}
		members[c.NodePool.Name]++
		if Disrupting(c) || !nodeReady(c.Node) {
			disrupting[c.NodePool.Name]++
		}
	}
	return members, disrupting
}

// counted: the candidate is part of its pool's budget base.
func counted(c Candidate) bool {
	conds := c.NodeClaim.Status.Conditions
	return c.Node != nil && meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeInitialized) &&
		!meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeInstanceTerminating)
}

// nodeReady: the node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Disrupting: the NodeClaim or its node is being deleted, or a disruption
// decision holds it (its node is tainted karpenter.sh/disrupted, or its
// DisruptionReason condition is set); no new decision takes it, and it
// counts against budgets.
func Disrupting(c Candidate) bool {
	if c.NodeClaim.DeletionTimestamp != nil || meta.IsStatusConditionTrue(c.NodeClaim.Status.Conditions, karpv1.ConditionTypeDisruptionReason) {
		return true
	}
	if c.Node == nil {
		return false
	}
	if c.Node.DeletionTimestamp != nil {
		return true
	}
	for _, t := range c.Node.Spec.Taints {
		if t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}
