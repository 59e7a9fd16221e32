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
	// Cloud is the cloud provider the seed ran with: "kwok" or "aws".
	Cloud string
	// Faults injected, by kind, and Violations found.
	Faults     map[string]int
	Violations []Violation
	// Err: the simulation itself failed (not an invariant).
	Err error
	// Wall is the wall time the seed took.
	Wall time.Duration
}

// AWSEvery: one chaos seed in AWSEvery (those divisible by it) plays
// examples/chaos-aws with the AWS provider against the fake AWS, so its
// idempotency paths (CreateFleet answers lost, client tokens, instances
// found by tag) are played too; the others play examples/chaos on kwok.
const AWSEvery = 4

// chaosExample is what one chaos seed plays.
type chaosExample struct {
	in    *Input
	types []catalog.InstanceType
	cloud string
	dir   string
}

// ChaosSeeds plays the embedded chaos examples (examples/chaos: a mixed
// day with every fault kind; examples/chaos-aws, the same on the AWS
// provider, for one seed in AWSEvery) once per seed, at most parallel at
// once, and returns the results in seed order. Each seed replays with the
// command its violations carry, e.g. `nodewright simulate -f
// examples/chaos --chaos SEED`.
func ChaosSeeds(ctx context.Context, seeds []int64, parallel int, types []catalog.InstanceType) []ChaosResult {
	load := func(path, cloud, dir string) (chaosExample, error) {
		in, err := LoadFS(examples.FS, path)
		if err != nil {
			return chaosExample{}, err
		}
		ts, err := in.Catalog(types)
		return chaosExample{in: in, types: ts, cloud: cloud, dir: dir}, err
	}
	kwok, err := load(examples.Chaos, "kwok", "examples/chaos")
	var aws chaosExample
	if err == nil {
		aws, err = load(examples.ChaosAWS, "aws", "examples/chaos-aws")
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
				ex := kwok
				if seeds[i]%AWSEvery == 0 {
					ex = aws
				}
				out[i] = chaosSeed(ctx, ex, seeds[i])
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

func chaosSeed(ctx context.Context, ex chaosExample, seed int64) ChaosResult {
	start := time.Now()
	in := ex.in
	res := ChaosResult{Seed: seed, Cloud: ex.cloud}
	replay := fmt.Sprintf("nodewright simulate -f %s --chaos %d", ex.dir, seed)
	if ex.cloud == "aws" {
		replay = fmt.Sprintf("nodewright simulate -f %s --cloud-provider aws --chaos %d", ex.dir, seed)
	}
	opts := Options{InstanceTypes: ex.types, Seed: seed, Faults: in.Scenario.Spec.Faults.WithDefaults(ChaosFaults()),
		Replay: replay}
	if ex.cloud == "aws" {
		opts.CloudProvider = "aws"
	}
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
		res.Err = fmt.Errorf("seed %d (%s): %w", seed, ex.cloud, err)
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
	awsSeeds, awsLost := 0, 0
	for _, r := range results {
		for k, n := range r.Faults {
			faults[k] += n
		}
		for _, v := range r.Violations {
			violations[v.Invariant]++
		}
		seed := fmt.Sprint(r.Seed)
		if r.Cloud == "aws" {
			awsSeeds++
			awsLost += r.Faults[FaultCloudLaunchLost]
			seed += " (aws)"
		}
		if r.Err != nil || len(r.Violations) > 0 {
			failed = append(failed, seed)
		}
		slowest = max(slowest, r.Wall)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d seeds of examples/chaos (%d of them examples/chaos-aws on the fake AWS) in %s (slowest seed %s)\n",
		len(results), awsSeeds, wall.Round(time.Millisecond), slowest.Round(time.Millisecond))
	fmt.Fprintf(&b, "  %-45s %8s\n", "fault injected", "count")
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		fmt.Fprintf(&b, "  %-45s %8d\n", k, faults[k])
	}
	fmt.Fprintf(&b, "  %-45s %8d\n", "  of which CreateFleet answers the fake AWS lost", awsLost)
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
