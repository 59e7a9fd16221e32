// Command chaos plays the chaos example (examples/chaos) for many seeds
// with every fault kind on, and prints the faults injected per kind, the
// violations per invariant and the wall time. `make chaos` runs it for
// 2,000 seeds. It exits 1 when a seed broke an invariant or failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodewright/nodewright/internal/simulator"
	"github.com/nodewright/nodewright/pkg/catalog"
)

func main() {
	seeds := flag.Int("seeds", 2000, "how many seeds to play")
	first := flag.Int64("first", 1, "the first seed")
	parallel := flag.Int("parallel", 2, "seeds played at once")
	verbose := flag.Bool("v", false, "print each violation and error")
	profile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos: -cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*first, *seeds, *parallel, *verbose); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(first int64, n, parallel int, verbose bool) error {
	if n <= 0 || parallel <= 0 {
		return fmt.Errorf("-seeds %d -parallel %d: want positive numbers", n, parallel)
	}
	types, err := catalog.Default()
	if err != nil {
		return err
	}
	debug.SetGCPercent(simulator.SimulateGCPercent)
	seeds := make([]int64, n)
	for i := range seeds {
		seeds[i] = first + int64(i)
	}
	start := time.Now()
	results := simulator.ChaosSeeds(context.Background(), seeds, parallel, types)
	fmt.Print(simulator.ChaosTable(results, time.Since(start)))
	bad := 0
	for _, r := range results {
		if r.Err == nil && len(r.Violations) == 0 {
			continue
		}
		bad++
		if !verbose {
			continue
		}
		if r.Err != nil {
			fmt.Printf("seed %d: %v\n", r.Seed, r.Err)
		}
		for _, v := range r.Violations {
			fmt.Printf("seed %d: %s at %s: %s\n  replay: %s\n", r.Seed, v.Invariant, time.Duration(v.At), v.Message, v.Replay)
			for _, line := range v.Timeline {
				fmt.Printf("    %s\n", line)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d seeds broke an invariant or failed", bad, n)
	}
	return nil
}
