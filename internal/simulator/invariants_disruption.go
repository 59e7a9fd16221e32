package simulator

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
)

// checkTaints: a node carrying the disrupted taint longer than the grace
// (from the taint, or from the disruption loop's restart) is being deleted,
// or its NodeClaim is, or a live decision holds it; a node without a
// NodeClaim has no decision to hold it. The grace is the interruption
// controller's when it holds the NodeClaim (nodewright.dev/interruption),
// whoever put the taint on first.
func (c *checker) checkTaints(now time.Time) {
	var tainted []string
	for name, n := range c.nodes {
		if !n.taintedAt.IsZero() && !n.deleting {
			tainted = append(tainted, name)
		}
	}
	slices.Sort(tainted)
	for _, name := range tainted {
		n := c.nodes[name]
		claim, s := c.claimOfNode(name, n)
		grace := TaintGrace
		if n.tainter == actorInterruption || s != nil && s.interrupted {
			grace = InterruptionTaintGrace
		}
		since := n.taintedAt
		if c.loopSince.After(since) {
			since = c.loopSince
		}
		if now.Sub(since) <= grace {
			continue
		}
		if s != nil && (s.deleting || c.e.components.Disruption.Deciding(claim)) {
			continue
		}
		if s == nil {
			// No NodeClaim: no decision can hold it (Nodewright has no
			// business tainting a node it does not manage).
			c.record(InvariantNoStrayTaint, name+"@"+c.offset(n.taintedAt), []string{"node/" + name},
				"node %s has carried %s:NoSchedule since %s (put on by %s) and has no NodeClaim: no disruption decision can hold it",
				name, karpv1.TaintKeyDisrupted, c.offset(n.taintedAt), n.tainter)
			continue
		}
		c.record(InvariantNoStrayTaint, name+"@"+c.offset(n.taintedAt), []string{"node/" + name, "nodeclaim/" + claim},
			"node %s has carried %s:NoSchedule since %s (put on by %s), its nodeclaim %s is not being deleted and no disruption decision holds it",
			name, karpv1.TaintKeyDisrupted, c.offset(n.taintedAt), n.tainter, claim)
	}
}

// checkBudgets: as a NodeClaim starts a voluntary disruption (a
// voluntary DisruptionReason set, or its deletion by the disruption loop),
// the nodes of its pool disrupting, whatever their reason, are at most
// what the pool's budgets allow for the reason it starts for, as
// Karpenter counts them: of the pool's initialized nodes whose instance is
// not terminating (the base), those being deleted, marked (a
// DisruptionReason or the disrupted taint) or NotReady. A NodeClaim whose
// Node is gone is no longer a node. Forceful removals (expiry,
// interruption, garbage collection) count as disrupting but are not
// checked themselves.
func (c *checker) checkBudgets(now time.Time) {
	if len(c.disrupting) == 0 {
		return
	}
	started := c.disrupting
	c.disrupting = nil
	type poolReason struct {
		pool   string
		reason karpv1.DisruptionReason
	}
	first := map[poolReason]string{}
	var order []poolReason
	for _, st := range started {
		s := c.claims[st.claim]
		if s == nil {
			continue
		}
		k := poolReason{s.pool, st.reason}
		if _, ok := first[k]; !ok {
			first[k] = st.claim
			order = append(order, k)
		}
	}
	for _, k := range order {
		np := c.pools[k.pool]
		if np == nil {
			continue
		}
		total := 0
		var disrupting []string
		for _, name := range slices.Sorted(maps.Keys(c.claims)) {
			s := c.claims[name]
			n := c.nodes[s.nodeName]
			if s.pool != k.pool || s.instanceTerminating || n == nil || !s.initialized {
				continue // not one of the pool's nodes any more
			}
			total++
			if s.deleting || s.reason != "" || n.deleting || !n.taintedAt.IsZero() || !n.ready {
				disrupting = append(disrupting, name)
			}
		}
		allowed, why, err := c.budgetAllows(np, k.reason, total, now)
		if err != nil || len(disrupting) <= allowed {
			continue
		}
		objects := []string{"nodepool/" + k.pool}
		for _, name := range disrupting {
			objects = append(objects, "nodeclaim/"+name)
		}
		c.record(InvariantBudgets, k.pool+"/"+string(k.reason)+"/"+first[k], objects,
			"%d nodeclaims of nodepool %s disrupting at once (%s) as %s starts disrupting for %s: its budgets allow %d (%s)",
			len(disrupting), k.pool, strings.Join(disrupting, ", "), first[k], cmp.Or(string(k.reason), "a reason not recorded"), allowed, why)
	}
}

// budgetAllows is how many nodes a pool's budgets allow disrupting for a
// reason; for "" (a deletion by the disruption loop with no reason
// recorded), the most any voluntary reason's allow.
func (c *checker) budgetAllows(np *karpv1.NodePool, reason karpv1.DisruptionReason, total int, now time.Time) (int, string, error) {
	if reason != "" {
		return disruption.Allowed(np, reason, total, 0, now)
	}
	best, why := -1, ""
	for _, r := range []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized} {
		n, w, err := disruption.Allowed(np, r, total, 0, now)
		if err != nil {
			return 0, "", err
		}
		if n > best {
			best, why = n, w
		}
	}
	return best, why, nil
}

// startedDisrupting is a NodeClaim starting a voluntary disruption, for
// reason (the pool's budgets for it apply; "": a deletion by the
// disruption loop with no reason recorded).
type startedDisrupting struct {
	claim  string
	reason karpv1.DisruptionReason
}
