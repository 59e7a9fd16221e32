package simulator

import (
	"maps"
	"slices"
	"strings"
	"time"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
)

// checkReplacements: the disruption loop deletes a candidate of a replace
// decision only once every replacement it names exists and is Initialized
// (cdisruption.ReplacementsAnnotation names them all, written before any
// is created). Deletions by forceful paths (expiration, interruption,
// garbage collection, a user) are not the loop's and are not checked.
func (c *checker) checkReplacements(candidate string, s *claimState) {
	if s.replacements == "" {
		return
	}
	objects := []string{"nodeclaim/" + candidate}
	if s.nodeName != "" {
		objects = append(objects, "node/"+s.nodeName)
	}
	var wrong []string
	for _, name := range strings.Split(s.replacements, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		objects = append(objects, "nodeclaim/"+name)
		switch r := c.claims[name]; {
		case r == nil:
			wrong = append(wrong, name+" does not exist")
		case !r.initialized:
			wrong = append(wrong, name+" is not initialized")
		}
	}
	if len(wrong) > 0 {
		c.record(InvariantReplaceFirst, candidate, objects, "the disruption loop deleted nodeclaim %s while its replacement %s",
			candidate, strings.Join(wrong, ", "))
	}
}

// checkTaints: a node carrying the disrupted taint longer than the grace
// (from the taint, or from the disruption loop's restart) is being deleted,
// or its NodeClaim is, or a live decision holds it.
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
		grace := TaintGrace
		if n.tainter == actorInterruption {
			grace = InterruptionTaintGrace
		}
		since := n.taintedAt
		if c.loopSince.After(since) {
			since = c.loopSince
		}
		if now.Sub(since) <= grace {
			continue
		}
		claim, s := c.claimOfNode(name, n)
		if s == nil || s.deleting || c.e.components.Disruption.Deciding(claim) {
			continue
		}
		c.record(InvariantNoStrayTaint, name+"@"+c.offset(n.taintedAt), []string{"node/" + name, "nodeclaim/" + claim},
			"node %s has carried %s:NoSchedule since %s (put on by %s), its nodeclaim %s is not being deleted and no disruption decision holds it",
			name, karpv1.TaintKeyDisrupted, c.offset(n.taintedAt), n.tainter, claim)
	}
}

// checkBudgets: as a NodeClaim starts a voluntary disruption, the nodes of
// its pool disrupting for that reason (the DisruptionReason condition set,
// instance not yet terminating) are at most what the pool's budgets allow,
// over Karpenter's base: the pool's initialized nodes whose instance is
// not terminating. A NodeClaim whose Node is gone is no longer a node.
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
	for _, name := range started {
		s := c.claims[name]
		if s == nil || !voluntary(s.reason) {
			continue
		}
		k := poolReason{s.pool, s.reason}
		if _, ok := first[k]; !ok {
			first[k] = name
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
			if s.pool != k.pool || s.instanceTerminating || c.nodes[s.nodeName] == nil {
				continue // not one of the pool's nodes any more
			}
			if s.initialized {
				total++
			}
			if s.reason == k.reason {
				disrupting = append(disrupting, name)
			}
		}
		allowed, why, err := disruption.Allowed(np, k.reason, total, 0, now)
		if err != nil || len(disrupting) <= allowed {
			continue
		}
		objects := []string{"nodepool/" + k.pool}
		for _, name := range disrupting {
			objects = append(objects, "nodeclaim/"+name)
		}
		c.record(InvariantBudgets, k.pool+"/"+string(k.reason)+"/"+first[k], objects,
			"%d nodeclaims of nodepool %s disrupting for %s at once (%s): its budgets allow %d (%s)",
			len(disrupting), k.pool, k.reason, strings.Join(disrupting, ", "), allowed, why)
	}
}
