package disruption

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/sched"
)

// Explanation says what disruption would do with one node now, and why.
type Explanation struct {
	Node, NodeClaim, NodePool string
	// Facts describe the node: type, price, age, pods, conditions, budgets.
	Facts []string
	// Verdict is what would happen now: the node goes (and how), or why it
	// stays.
	Verdict string
}

// Write prints the explanation for a person.
func (e Explanation) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Node %s (NodeClaim %s, NodePool %s)\n", e.Node, e.NodeClaim, e.NodePool)
	for _, f := range e.Facts {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "Verdict: %s\n", e.Verdict)
	_, err := io.WriteString(w, b.String())
	return err
}

// Explain runs every disruption method on the cluster as it is now,
// without acting and without the shortcuts a pass takes (an unchanged
// cluster, pods being provisioned for), and says what would become of the
// node (named by Node or NodeClaim name).
func (l *Loop) Explain(ctx context.Context, name string) (Explanation, error) {
	now := l.clock.Now()
	cands, settled, err := l.candidates(ctx)
	if err != nil {
		return Explanation{}, err
	}
	i := slices.IndexFunc(cands, func(c disruption.Candidate) bool {
		return c.Name() == name || c.Node != nil && c.Node.Name == name
	})
	if i < 0 {
		return Explanation{}, fmt.Errorf("node %s: no NodeClaim of a NodePool runs it (not managed by Nodewright, or gone)", name)
	}
	c := cands[i]
	e := Explanation{NodeClaim: c.Name(), NodePool: c.NodePool.Name, Node: "(not registered)"}
	if c.Node != nil {
		e.Node = c.Node.Name
	}
	snap := l.cluster.Snapshot()
	var pools []sched.NodePool
	if l.pools != nil {
		if pools, _, err = l.pools.Pools(ctx, snap); err != nil {
			return Explanation{}, err
		}
	}
	e.Facts = facts(c, pools, cands, now)
	if l.pending != nil && slices.Contains(l.pending.claims, c.Name()) {
		e.Verdict = fmt.Sprintf("a %s decision takes it; it is being validated until %s", l.pending.reason, l.pending.at.UTC().Format("15:04:05"))
		return e, nil
	}
	if l.launching != nil && slices.Contains(l.launching.candidates, c.Name()) {
		e.Verdict = fmt.Sprintf("being disrupted (%s): waiting for replacements %s to initialize", l.launching.reason, strings.Join(l.launching.replacements, ", "))
		return e, nil
	}
	if disruption.Disrupting(c) {
		e.Verdict = "already being disrupted (deleting, tainted karpenter.sh/disrupted, or marked with a DisruptionReason)"
		return e, nil
	}
	base := sched.Input{Namespaces: snap.Namespaces, PersistentVolumeClaims: snap.PersistentVolumeClaims,
		PersistentVolumes: snap.PersistentVolumes, StorageClasses: snap.StorageClasses, DaemonSetPods: snap.DaemonSetPods}
	var stays []string
	for _, method := range []struct {
		name   string
		decide func() (disruption.Decision, error)
	}{
		{"emptiness", func() (disruption.Decision, error) { return disruption.Emptiness(cands, now) }},
		{"drift", func() (disruption.Decision, error) { return disruption.Drift(cands, snap.Nodes, pools, base, now) }},
		{"consolidation", func() (disruption.Decision, error) {
			return disruption.Underutilized(cands, snap.Nodes, pools, base, *l.opts.Policy, now)
		}},
	} {
		d, err := method.decide()
		if err != nil {
			return Explanation{}, err
		}
		if slices.ContainsFunc(d.Command.Candidates, func(x disruption.Candidate) bool { return x.Name() == c.Name() }) {
			e.Verdict = "it goes: " + verdict(d.Command)
			if !settled && method.name != "emptiness" {
				e.Verdict += " (once the pods being provisioned for have landed: until then the loop waits)"
			}
			return e, nil
		}
		if why, ok := d.Stays[c.Name()]; ok {
			stays = append(stays, method.name+": "+why)
		}
	}
	if why := disruption.Blocked(c, now); why != "" {
		e.Verdict = "it stays: " + why
		return e, nil
	}
	if len(stays) == 0 {
		e.Verdict = "it stays: no method applies to it (not empty, not drifted, and consolidation has nothing to say)"
		return e, nil
	}
	e.Verdict = "it stays: " + strings.Join(stays, "; ")
	return e, nil
}

// verdict describes a command that takes the candidate.
func verdict(cmd disruption.Command) string {
	switch {
	case len(cmd.Replacements) == 0 && len(cmd.Candidates) == 1:
		return fmt.Sprintf("%s, deleted; its pods fit on the other nodes", cmd.Reason)
	case len(cmd.Replacements) == 0:
		return fmt.Sprintf("%s, deleted with %d other nodes; their pods fit on the nodes that stay", cmd.Reason, len(cmd.Candidates)-1)
	}
	var r []string
	for _, p := range cmd.Replacements {
		r = append(r, fmt.Sprintf("%s (%s, $%.4f/h)", p.InstanceType, p.CapacityType, p.Price))
	}
	with := ""
	if len(cmd.Candidates) > 1 {
		with = fmt.Sprintf(" together with %d other nodes", len(cmd.Candidates)-1)
	}
	return fmt.Sprintf("%s, replaced%s by %s, launched and initialized before it is drained", cmd.Reason, with, strings.Join(r, ", "))
}

// facts describe a candidate: what it runs, what it costs, its conditions
// and its pool's budgets now.
func facts(c disruption.Candidate, pools []sched.NodePool, cands []disruption.Candidate, now time.Time) []string {
	labels := c.NodeClaim.Labels
	price := "price unknown"
	if v, ok := disruption.CandidatePrice(c, pools); ok {
		price = fmt.Sprintf("$%.4f/h", v)
	}
	daemons := len(c.Pods) - len(disruption.Reschedulable(c.Pods))
	out := []string{
		fmt.Sprintf("%s %s in %s, %s, %s old", labels[corev1.LabelInstanceTypeStable], labels[karpv1.LabelCapacityType], labels[corev1.LabelTopologyZone],
			price, now.Sub(c.NodeClaim.CreationTimestamp.Time).Round(time.Second)),
		fmt.Sprintf("pods: %d (%d DaemonSet or mirror pods)", len(c.Pods), daemons),
	}
	after := "Never"
	if d := c.NodePool.Spec.Disruption.ConsolidateAfter.Duration; d != nil {
		after = d.String()
	}
	out = append(out, fmt.Sprintf("NodePool %s: consolidationPolicy %s, consolidateAfter %s", c.NodePool.Name, c.NodePool.Spec.Disruption.ConsolidationPolicy, after))
	for _, t := range []string{karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeDrifted} {
		cond := meta.FindStatusCondition(c.NodeClaim.Status.Conditions, t)
		switch {
		case cond == nil:
			out = append(out, fmt.Sprintf("%s: not set", t))
		case cond.Message != "":
			out = append(out, fmt.Sprintf("%s: %s (%s: %s)", t, cond.Status, cond.Reason, cond.Message))
		default:
			out = append(out, fmt.Sprintf("%s: %s", t, cond.Status))
		}
	}
	all, disruptingAll := disruption.PoolCounts(cands)
	members, disrupting := all[c.NodePool.Name], disruptingAll[c.NodePool.Name]
	for _, reason := range []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized} {
		n, why, err := disruption.Allowed(c.NodePool, reason, members, disrupting, now)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("budget for %s: %v", reason, err))
		case why == "no budget applies":
			out = append(out, fmt.Sprintf("budget for %s: none applies (%d disrupting)", reason, disrupting))
		default:
			out = append(out, fmt.Sprintf("budget for %s: %d more now (%s, %d disrupting)", reason, n, why, disrupting))
		}
	}
	return out
}
