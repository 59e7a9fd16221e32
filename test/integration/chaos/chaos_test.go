//go:build integration

package chaos_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// defaultSeed fixes the kill instants of a run unless NODEWRIGHT_CHAOS_SEED
// names others.
const defaultSeed = 13

// chaosSeed returns the run's seed and logs how to replay it.
func chaosSeed(t *testing.T) int64 {
	t.Helper()
	seed := int64(defaultSeed)
	if v := os.Getenv("NODEWRIGHT_CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("NODEWRIGHT_CHAOS_SEED=%q: not an integer", v)
		}
	}
	t.Logf("chaos seed %d (replay: NODEWRIGHT_CHAOS_SEED=%d)", seed, seed)
	return seed
}

// killer SIGKILLs a child at seeded instants and restarts it at once.
type killer struct {
	t     *testing.T
	c     *child
	rng   *rand.Rand
	begin time.Time
	log   []string
}

func newKiller(t *testing.T, c *child, seed int64) *killer {
	return &killer{t: t, c: c, rng: rand.New(rand.NewSource(seed)), begin: time.Now()}
}

// between draws a duration uniformly in [lo, hi).
func (k *killer) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(k.rng.Int63n(int64(hi-lo)))
}

// randomKill kills after a delay drawn in [lo, hi) from now.
func (k *killer) randomKill(lo, hi time.Duration) {
	k.t.Helper()
	d := k.between(lo, hi)
	time.Sleep(d)
	k.restart(fmt.Sprintf("random, %s after the previous start", d.Round(time.Millisecond)))
}

// killWhen waits (at most limit) for cond, then kills after a delay drawn
// in [0, jitter); if cond never holds it kills at limit.
func (k *killer) killWhen(ctx context.Context, what string, cond func(context.Context) bool, limit, jitter time.Duration) {
	k.t.Helper()
	d := k.between(0, jitter) // drawn first: the sequence of draws does not depend on timing
	start := time.Now()
	seen := false
	for time.Since(start) < limit {
		if cond(ctx) {
			seen = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !seen {
		k.restart(fmt.Sprintf("waited %s for %s, none", limit, what))
		return
	}
	time.Sleep(d)
	k.restart(fmt.Sprintf("%s after %s, +%s", what, time.Since(start).Round(time.Millisecond), d.Round(time.Millisecond)))
}

// coin draws true with probability p.
func (k *killer) coin(p float64) bool { return k.rng.Float64() < p }

func (k *killer) restart(why string) {
	k.t.Helper()
	if err := k.c.restart(); err != nil {
		k.t.Fatalf("kill %d: %v", k.c.kills, err)
	}
	k.log = append(k.log, fmt.Sprintf("kill %2d at +%6.1fs: %s", k.c.kills, time.Since(k.begin).Seconds(), why))
}

// summary is the list of kills, one a line.
func (k *killer) summary() string { return strings.Join(k.log, "\n") }

// monitor reads the cluster every interval while a run goes on and keeps
// what must never happen even for a moment (an instance launched twice),
// with the peak counts.
type monitor struct {
	read     func(context.Context) (*clusterState, error)
	mu       sync.Mutex
	dups     map[string]time.Time
	claims   map[string]bool
	peak     int
	reads    int
	failures int
	lastErr  error
	cancel   context.CancelFunc
	done     chan struct{}
}

func startMonitor(t *testing.T, read func(context.Context) (*clusterState, error), interval time.Duration) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{read: read, dups: map[string]time.Time{}, claims: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			m.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	t.Cleanup(func() { m.stop() })
	return m
}

func (m *monitor) sample(ctx context.Context) {
	s, err := m.read(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			m.failures++
			m.lastErr = err
		}
		return
	}
	m.reads++
	for _, d := range s.duplicates() {
		if _, ok := m.dups[d]; !ok {
			m.dups[d] = s.at
		}
	}
	for _, nc := range s.claims {
		m.claims[nc.Name] = true
	}
	live := len(s.nodes)
	if s.aws {
		live = len(s.instances)
	}
	m.peak = max(m.peak, live)
}

// seen is what a monitor saw over a run.
type seen struct {
	// dups: instances launched twice, with when each was first seen.
	dups []string
	// claims: NodeClaims that existed; peak: most live instances at once.
	claims, peak int
	// reads and failed: readings of the cluster made, and failed.
	reads, failed int
	lastErr       error
}

func (s seen) String() string {
	out := fmt.Sprintf("%d NodeClaims created, peak %d live instances; %d monitor reads", s.claims, s.peak, s.reads)
	if s.failed > 0 {
		out += fmt.Sprintf(" (%d failed, the last: %v)", s.failed, s.lastErr)
	}
	return out
}

// stop ends the monitor and returns what it saw.
func (m *monitor) stop() seen {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	out := seen{claims: len(m.claims), peak: m.peak, reads: m.reads, failed: m.failures, lastErr: m.lastErr}
	for d, at := range m.dups {
		out.dups = append(out.dups, fmt.Sprintf("%s (first seen %s)", d, at.UTC().Format(time.TimeOnly)))
	}
	slices.Sort(out.dups)
	return out
}

// report prints a run's counts and fails the test for each invariant the
// final state (or the monitor, at any instant) broke.
func report(t *testing.T, seed int64, k *killer, final *clusterState, why []string, saw seen, counts string, wantPods int) {
	t.Helper()
	leaked, taints, decisions := final.leaked(), final.stuckTaints(), final.stuckDecisions()
	running, _ := final.running()
	dups := saw.dups
	t.Logf("seed %d: %d kills, %d controller starts; %s; %s\nduplicate-instance sets seen %d, leaked %d, stuck disrupted taints %d, stuck DisruptionReasons %d, pods Running %d/%d\nkills:\n%s",
		seed, k.c.kills, k.c.starts, saw, counts, len(dups), len(leaked), len(taints), len(decisions), running, wantPods, k.summary())
	violated := false
	for _, v := range []struct {
		what  string
		found []string
	}{
		{"instances launched twice (each distinct set seen, at any instant)", dups},
		{"instances no NodeClaim owns after the GC grace", leaked},
		{"disrupted taints on nodes whose NodeClaim is not being deleted", taints},
		{"DisruptionReasons on NodeClaims not being deleted", decisions},
	} {
		if len(v.found) > 0 {
			violated = true
			t.Errorf("seed %d: %s:\n  %s", seed, v.what, strings.Join(v.found, "\n  "))
		}
	}
	if running != wantPods {
		violated = true
		t.Errorf("seed %d: %d of %d pods bound and Running", seed, running, wantPods)
	}
	if saw.reads == 0 {
		violated = true
		t.Errorf("seed %d: the monitor never read the cluster: %v", seed, saw.lastErr)
	}
	if why != nil && !violated {
		t.Errorf("seed %d: the pool did not settle: %v", seed, why)
	}
	if why != nil || violated {
		t.Logf("%s", final)
		t.Logf("controller log tail:\n%s", k.c.tail(60))
	}
}
