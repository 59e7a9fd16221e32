//go:build chaos

package simulator

import (
	"context"
	"flag"
	"runtime/debug"
	"testing"
	"time"
)

var chaosSeedCount = flag.Int("chaos.seeds", 200, "seeds of examples/chaos TestChaos plays")

// TestChaos plays the chaos example (a mixed day: scale-ups and downs,
// Jobs, drift, expiry, consolidation, interruptions, PodDisruptionBudgets
// and a do-not-disrupt pod) for 200 seeds with every fault kind on: API
// write errors, conflicts and lost answers, controller crashes and
// restarts, cloud capacity errors, throttling, 5xx, timeouts and lost
// launch answers, nodes turning NotReady, instances vanishing and spot
// interruptions. Every invariant must hold on every seed, and every fault
// kind must have been injected. One seed in AWSEvery plays the same day on
// the AWS provider against the fake AWS (examples/chaos-aws), whose
// CreateFleet must have lost answers. `make test-chaos` runs it.
func TestChaos(t *testing.T) {
	seeds := make([]int64, *chaosSeedCount)
	for i := range seeds {
		seeds[i] = int64(i + 1)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(SimulateGCPercent))
	start := time.Now()
	results := ChaosSeeds(context.Background(), seeds, 2, defaultCatalog(t))
	t.Log("\n" + ChaosTable(results, time.Since(start)))
	injected := map[string]int{}
	awsSeeds, awsLost := 0, 0
	for _, r := range results {
		if r.Cloud == "aws" {
			awsSeeds++
			awsLost += r.Faults[FaultCloudLaunchLost]
		}
		if r.Err != nil {
			t.Errorf("seed %d: %v", r.Seed, r.Err)
		}
		for _, v := range r.Violations {
			t.Errorf("seed %d: %s at %s: %s (objects %v)\n  replay: %s\n  timeline:\n    %s", r.Seed, v.Invariant, time.Duration(v.At),
				v.Message, v.Objects, v.Replay, joinLines(v.Timeline))
		}
		for k, n := range r.Faults {
			injected[k] += n
		}
	}
	for _, k := range ChaosFaults().kinds() {
		if injected[k] == 0 {
			t.Errorf("fault %s was never injected in %d seeds", k, len(seeds))
		}
	}
	if awsSeeds == 0 || awsLost == 0 {
		t.Errorf("%d seeds on the fake AWS, %d CreateFleet answers lost: want the AWS provider's lost-launch paths played", awsSeeds, awsLost)
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n    "
		}
		out += l
	}
	return out
}
