package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// DefaultBudget applies when a NodePool lists none (Karpenter's default).
var DefaultBudget = karpv1.Budget{Nodes: "10%"}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Allowed is how many of a pool's nodes may be disrupted now for reason:
// the most restrictive budget active at now that applies to the reason,
// minus the nodes already disrupting, never below zero. total is the
// pool's node count; percentages round up. explain says which budget
// bounds it.
func Allowed(np *karpv1.NodePool, reason karpv1.DisruptionReason, total, disrupting int, now time.Time) (allowed int, explain string, err error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{DefaultBudget}
	}
	allowed, explain = math.MaxInt, ""
	for i, b := range budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		active, err := Active(b, now)
		if err != nil {
			return 0, "", fmt.Errorf("nodepool %s: spec.disruption.budgets[%d]: %w", np.Name, i, err)
		}
		if !active {
			continue
		}
		n, err := nodesOf(b.Nodes, total)
		if err != nil {
			return 0, "", fmt.Errorf("nodepool %s: spec.disruption.budgets[%d].nodes: %w", np.Name, i, err)
		}
		if n < allowed {
			allowed, explain = n, fmt.Sprintf("budget %d (nodes %s) allows %d of %d nodes", i, b.Nodes, n, total)
		}
	}
	if allowed == math.MaxInt {
		return math.MaxInt, "no budget applies", nil
	}
	return max(allowed-disrupting, 0), explain, nil
}

// nodesOf turns "5" or "10%" of total into a count (percentages round up).
func nodesOf(nodes string, total int) (int, error) {
	if p, ok := strings.CutSuffix(nodes, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 100 {
			return 0, fmt.Errorf("%q is not a percentage from 0%% to 100%%", nodes)
		}
		return int(math.Ceil(float64(total) * float64(v) / 100)), nil
	}
	v, err := strconv.Atoi(nodes)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a count or a percentage", nodes)
	}
	return v, nil
}

// Active reports whether a budget's window is open at now: always without
// a schedule; else when the schedule (UTC) last fired less than duration
// ago.
func Active(b karpv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("schedule %q needs a duration", *b.Schedule)
	}
	sched, err := cronParser.Parse(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", *b.Schedule, err)
	}
	now = now.UTC()
	// The window [fire, fire+duration) holds now iff the schedule fires in
	// (now-duration, now].
	next := sched.Next(now.Add(-b.Duration.Duration))
	return !next.After(now), nil
}
