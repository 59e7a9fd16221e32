package simulator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodewright/nodewright/examples"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// ChaosResult is one seed of a chaos run.
type ChaosResult struct {
	Seed int64
	// Faults injected, by kind, and Violations found.
	Faults     map[string]int
	Violations []Violation
	// Err: the simulation itself failed (not an invariant).
	Err error
	// Wall is the wall time the seed took.
	Wall time.Duration
}

// ChaosSeeds plays the embedded chaos example (examples/chaos: a mixed
// day with every fault kind) once per seed, at most parallel at once, and
// returns the results in seed order. Each seed replays with
// `nodewright simulate -f examples/chaos --chaos SEED`.
func ChaosSeeds(ctx context.Context, seeds []int64, parallel int, types []catalog.InstanceType) []ChaosResult {
	in, err := LoadFS(examples.FS, examples.Chaos)
	if err == nil {
		types, err = in.Catalog(types)
	}
	out := make([]ChaosResult, len(seeds))
	if err != nil {
		for i, s := range seeds {
			out[i] = ChaosResult{Seed: s, Err: err}
		}
		return out
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				out[i] = chaosSeed(ctx, in, types, seeds[i])
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func chaosSeed(ctx context.Context, in *Input, types []catalog.InstanceType, seed int64) ChaosResult {
	start := time.Now()
	res := ChaosResult{Seed: seed}
	opts := Options{InstanceTypes: types, Seed: seed, Faults: in.Scenario.Spec.Faults.WithDefaults(ChaosFaults()),
		Replay: fmt.Sprintf("nodewright simulate -f examples/chaos --chaos %d", seed)}
	if d := in.Scenario.Spec.Duration; d != nil {
		opts.Duration = time.Duration(*d)
	}
	if b := in.Scenario.Spec.BootDelay; b != nil {
		opts.BootDelay = time.Duration(*b)
	}
	e, err := New(opts)
	if err == nil {
		err = e.Load(ctx, in)
	}
	var rep *Report
	if err == nil {
		rep, err = e.Run(ctx)
	}
	res.Wall = time.Since(start)
	if err != nil {
		res.Err = fmt.Errorf("seed %d: %w", seed, err)
		return res
	}
	res.Faults, res.Violations = rep.Faults, rep.Violations
	return res
}

// ChaosTable sums results up: faults injected per kind, violations per
// invariant, the seeds that failed, and the wall time.
func ChaosTable(results []ChaosResult, wall time.Duration) string {
	faults := map[string]int{}
	violations := map[string]int{}
	for _, k := range ChaosFaults().kinds() {
		faults[k] = 0
	}
	for _, k := range Invariants {
		violations[k] = 0
	}
	var failed []string
	var slowest time.Duration
	for _, r := range results {
		for k, n := range r.Faults {
			faults[k] += n
		}
		for _, v := range r.Violations {
			violations[v.Invariant]++
		}
		if r.Err != nil || len(r.Violations) > 0 {
			failed = append(failed, fmt.Sprint(r.Seed))
		}
		slowest = max(slowest, r.Wall)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d seeds of examples/chaos in %s (slowest seed %s)\n", len(results), wall.Round(time.Millisecond), slowest.Round(time.Millisecond))
	fmt.Fprintf(&b, "  %-45s %8s\n", "fault injected", "count")
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		fmt.Fprintf(&b, "  %-45s %8d\n", k, faults[k])
	}
	fmt.Fprintf(&b, "  %-45s %8s\n", "invariant", "violated")
	for _, k := range slices.Sorted(maps.Keys(violations)) {
		fmt.Fprintf(&b, "  %-45s %8d\n", k, violations[k])
	}
	if len(failed) == 0 {
		b.WriteString("  every seed held every invariant\n")
	} else {
		fmt.Fprintf(&b, "  seeds with a violation or an error: %s\n", strings.Join(failed, ", "))
	}
	return b.String()
}
