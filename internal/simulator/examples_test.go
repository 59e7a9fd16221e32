package simulator

import (
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/nodewright/nodewright/examples"
)

// simulate runs in with opts (the default catalog unless opts has one)
// and returns what Run returns.
func simulate(t testing.TB, in *Input, opts Options) (*Report, error) {
	t.Helper()
	if opts.InstanceTypes == nil {
		opts.InstanceTypes = defaultCatalog(t)
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Load(ctx, in); err != nil {
		t.Fatal(err)
	}
	return e.Run(ctx)
}

// mustSimulate is simulate that fails the test on an error.
func mustSimulate(t testing.TB, in *Input, opts Options) *Report {
	t.Helper()
	rep, err := simulate(t, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// runExample runs an embedded example with its scenario's duration and
// boot delay unless opts sets them.
func runExample(t testing.TB, path string, opts Options) *Report {
	t.Helper()
	in, err := LoadFS(examples.FS, path)
	if err != nil {
		t.Fatal(err)
	}
	if d := in.Scenario.Spec.Duration; d != nil && opts.Duration == 0 {
		opts.Duration = timeDuration(*d)
	}
	if b := in.Scenario.Spec.BootDelay; b != nil && opts.BootDelay == 0 {
		opts.BootDelay = timeDuration(*b)
	}
	return mustSimulate(t, in, opts)
}

func BenchmarkQuickstart(b *testing.B) {
	for b.Loop() {
		runExample(b, examples.Quickstart, Options{Seed: 1})
	}
}

// The quickstart: every pod gets a node after each scale-up, within the
// batch window plus the boot delay, and nothing is left pending.
func TestQuickstartBindsEveryPodPromptly(t *testing.T) {
	rep := runExample(t, examples.Quickstart, Options{Seed: 1})
	s := rep.Summary
	if s.PodsPendingAtEnd != 0 || s.PodsBound != s.PodsCreated {
		t.Errorf("%d of %d pods bound, %d pending at the end: want every pod bound", s.PodsBound, s.PodsCreated, s.PodsPendingAtEnd)
	}
	// 10 web pods, then 190 more, then 40 job pods.
	if s.PodsCreated < 240 {
		t.Errorf("%d pods created, want at least the 240 the scenario makes", s.PodsCreated)
	}
	// A pod waits for the batch to close (1 s idle, 10 s at most) and its
	// node to boot (30 s in the quickstart).
	if limit := (10*time.Second + 30*time.Second + time.Second).Seconds(); s.PendingSeconds.Max > limit {
		t.Errorf("a pod waited %.0f s, more than the batch window plus the boot delay (%.0f s)", s.PendingSeconds.Max, limit)
	}
	if s.CostTotal <= 0 || s.NodesPeak == 0 {
		t.Errorf("summary %+v: no nodes or no cost", s)
	}
	for _, e := range rep.Errors {
		t.Errorf("controller error: %s", e)
	}
}

// Same inputs, same seed: the same bytes.
func TestReportIsDeterministic(t *testing.T) {
	var outs [2]bytes.Buffer
	for i := range outs {
		rep := runExample(t, "seed/scenario.yaml", Options{Seed: 7})
		if err := rep.WriteJSON(&outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
		t.Errorf("two runs with seed 7 differ (%d and %d bytes)", outs[0].Len(), outs[1].Len())
	}
}

// BenchmarkDay runs examples/daily: 24 simulated hours peaking near 500
// nodes and 5,000 pods (target: under 60 s on 2 cores).
func BenchmarkDay(b *testing.B) {
	// As `nodewright simulate` runs (see cmd/nodewright/simulate.go).
	defer debug.SetGCPercent(debug.SetGCPercent(SimulateGCPercent))
	for b.Loop() {
		rep := runExample(b, "daily/scenario.yaml", Options{Seed: 1, Duration: dayDuration()})
		b.ReportMetric(float64(rep.Summary.NodesPeak), "peak-nodes")
		b.ReportMetric(float64(rep.Summary.PodsCreated), "pods")
	}
}

// dayDuration lets a profiling run cut the day short
// (NODEWRIGHT_BENCH_DAY=3h).
func dayDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("NODEWRIGHT_BENCH_DAY")); err == nil {
		return d
	}
	return 0
}
