package simulator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/examples"
	"github.com/nodewright/nodewright/internal/operator"
)

// faultStore is a store behind a fault client with the given API rates.
func faultStore(t *testing.T, api APIFaults) (*store, *faultClient) {
	t.Helper()
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(scheme, restMapper(scheme), clocktesting.NewFakeClock(DefaultStart), 1)
	return s, &faultClient{Client: s, in: newInjector(&Faults{API: &api}, 1)}
}

// Nodewright's writes fail, conflict or lose their answer as the rates
// say; a lost answer means the write happened although the caller got an
// error and kept its own copy.
func TestFaultClientWrites(t *testing.T) {
	ctx := context.Background()
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "default"}}
	}
	t.Run("errors refuse the write with a 500", func(t *testing.T) {
		s, c := faultStore(t, APIFaults{ErrorRate: 1})
		err := c.Create(ctx, pod())
		if !apierrors.IsInternalError(err) {
			t.Fatalf("create: %v, want 500", err)
		}
		if n := len(s.all()); n != 0 {
			t.Errorf("%d objects stored after a refused create", n)
		}
		if c.in.counts[FaultAPIError] != 1 {
			t.Errorf("counts %v, want one api-error", c.in.counts)
		}
	})
	t.Run("conflicts refuse updates and leave creates alone", func(t *testing.T) {
		s, c := faultStore(t, APIFaults{ConflictRate: 1})
		p := pod()
		if err := c.Create(ctx, p); err != nil {
			t.Fatalf("create: %v, want no conflict on a create", err)
		}
		p.Labels = map[string]string{"changed": "yes"}
		if err := c.Update(ctx, p); !apierrors.IsConflict(err) {
			t.Fatalf("update: %v, want 409", err)
		}
		stored := &corev1.Pod{}
		if err := s.Get(ctx, client.ObjectKeyFromObject(p), stored); err != nil || stored.Labels["changed"] != "" {
			t.Errorf("stored pod %v (%v): want it unchanged", stored.Labels, err)
		}
	})
	t.Run("lost answers perform the write", func(t *testing.T) {
		s, c := faultStore(t, APIFaults{LostRate: 1})
		p := pod()
		err := c.Create(ctx, p)
		if !apierrors.IsServerTimeout(err) {
			t.Fatalf("create: %v, want a server timeout", err)
		}
		if p.Name != "" {
			t.Errorf("the caller's pod got name %q: a lost answer tells it nothing", p.Name)
		}
		if n := len(s.all()); n != 1 {
			t.Errorf("%d objects stored, want the pod created", n)
		}
	})
	t.Run("a crashed Nodewright writes nothing", func(t *testing.T) {
		s, c := faultStore(t, APIFaults{})
		c.in.dead = true
		if err := c.Create(ctx, pod()); err == nil || !strings.Contains(err.Error(), "crashed") {
			t.Fatalf("create: %v, want the crash error", err)
		}
		if n := len(s.all()); n != 0 {
			t.Errorf("%d objects stored by a dead process", n)
		}
	})
}

// simulateWith runs an embedded example for d (0: its duration) with
// faults and the seed.
func simulateWith(t *testing.T, example string, d time.Duration, faults *Faults, seed int64) (*Engine, *Report) {
	t.Helper()
	in, err := LoadFS(examples.FS, example)
	if err != nil {
		t.Fatal(err)
	}
	types, err := in.Catalog(defaultCatalog(t))
	if err != nil {
		t.Fatal(err)
	}
	if d == 0 {
		d = timeDuration(*in.Scenario.Spec.Duration)
	}
	opts := Options{Seed: seed, InstanceTypes: types, Faults: faults, Duration: d}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Load(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e, rep
}

// Nodewright killed at random instants (mid-reconcile included) and
// restarted from the API keeps the cluster whole: every pod bound, every
// invariant held, and the crashes are in the report and the timeline.
func TestCrashesRestartNodewrightFromTheAPI(t *testing.T) {
	e, rep := simulateWith(t, examples.Quickstart, 0, &Faults{Crashes: &Every{Interval: Duration(4 * time.Minute)}}, 1)
	crashes := rep.Faults[FaultCrash]
	if crashes < 5 {
		t.Fatalf("faults %v: want crashes every ~4 minutes of 2 hours", rep.Faults)
	}
	entries := 0
	for _, entry := range rep.Timeline {
		if entry.Kind == EntryFault && entry.Reason == FaultCrash {
			entries++
		}
	}
	if entries != crashes {
		t.Errorf("%d crash entries on the timeline for %d crashes", entries, crashes)
	}
	if s := rep.Summary; s.PodsBound != s.PodsCreated || s.PodsPendingAtEnd != 0 {
		t.Errorf("%d of %d pods bound, %d pending: want every pod bound", s.PodsBound, s.PodsCreated, s.PodsPendingAtEnd)
	}
	for _, v := range rep.Violations {
		t.Errorf("violation %s at %s: %s", v.Invariant, time.Duration(v.At), v.Message)
	}
	for _, msg := range rep.Errors {
		if strings.Contains(msg, "crashed") {
			t.Errorf("a crash reported as a controller error: %s", msg)
		}
	}
	// The model the last restart rebuilt knows every node.
	var nodes corev1.NodeList
	if err := e.Client().List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	if got := len(e.components.Cluster.Inventory().Nodes); got != len(nodes.Items) {
		t.Errorf("the restarted model holds %d nodes, the API %d", got, len(nodes.Items))
	}
}

// The same seed gives the same faults and the same report, byte for byte;
// another seed other faults.
func TestChaosIsDeterministic(t *testing.T) {
	report := func(seed int64) string {
		_, rep := simulateWith(t, examples.Chaos, 40*time.Minute, ChaosFaults(), seed)
		var b bytes.Buffer
		if err := rep.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first, again, other := report(5), report(5), report(6)
	if first != again {
		t.Error("two runs with seed 5 differ")
	}
	if first == other {
		t.Error("seeds 5 and 6 give the same report")
	}
	if !strings.Contains(first, `"faults": {`) {
		t.Error("the JSON report has no faults")
	}
}

// A node whose kubelet stops turns Ready=Unknown and is tainted
// unreachable, its pods are deleted five minutes later; a vanished
// instance's NodeClaim goes.
func TestNodeFaults(t *testing.T) {
	e, rep := simulateWith(t, examples.Quickstart, 0, &Faults{NodeNotReady: &Every{Interval: Duration(20 * time.Minute)},
		InstanceVanished: &Every{Interval: Duration(20 * time.Minute)}}, 2)
	if rep.Faults[FaultNodeNotReady] == 0 || rep.Faults[FaultInstanceVanished] == 0 {
		t.Fatalf("faults %v: want both node faults", rep.Faults)
	}
	ctx := context.Background()
	for i, entry := range rep.Timeline {
		if entry.Kind != EntryFault {
			continue
		}
		switch entry.Reason {
		case FaultNodeNotReady:
			n := &corev1.Node{}
			if err := e.Client().Get(ctx, client.ObjectKey{Name: entry.Node}, n); apierrors.IsNotFound(err) {
				continue // Nodewright removed it later
			} else if err != nil {
				t.Fatal(err)
			}
			if takesPods(n) {
				t.Errorf("node %s is Ready after its kubelet stopped", n.Name)
			}
			if time.Duration(rep.End.Sub(rep.Start))-time.Duration(entry.At) > podEvictionTimeout {
				var pods corev1.PodList
				if err := e.Client().List(ctx, &pods); err != nil {
					t.Fatal(err)
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName == n.Name {
						t.Errorf("pod %s still on unreachable node %s", p.Name, n.Name)
					}
				}
			}
		case FaultInstanceVanished:
			gone := false
			for _, later := range rep.Timeline[i:] {
				gone = gone || later.Kind == EntryTerminated && later.Node == entry.Node
			}
			if !gone {
				t.Errorf("the NodeClaim of vanished node %s was never terminated", entry.Node)
			}
		}
	}
}

// A scenario's faults block is checked like the rest: unknown fields,
// rates out of range or adding up past 1, intervals missing.
func TestScenarioFaultsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name, faults, want string
	}{
		{"unknown field", "api: {errorRat: 0.1}", `unknown field "spec.faults.api.errorRat"`},
		{"rate above 1", "api: {errorRate: 1.5}", "spec.faults.api.errorRate: 1.5 is not a rate between 0 and 1"},
		{"rates add up past 1", "cloud: {throttleRate: 0.6, timeoutRate: 0.6}", "spec.faults.cloud: the rates add up to 1.2"},
		{"no interval", "crashes: {after: 5m}", "spec.faults.crashes.interval: required and positive"},
		{"bad duration", "nodeNotReady: {interval: soon}", "not a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: simulate.nodewright.dev/v1alpha1\nkind: Scenario\nspec:\n  faults:\n    " + tc.faults + "\n"
			err := parseScenario("s.yaml", []byte(doc), &Scenario{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
	var s Scenario
	doc := "apiVersion: simulate.nodewright.dev/v1alpha1\nkind: Scenario\nspec:\n  faults:\n    api: {conflictRate: 0.1}\n    crashes: {interval: 10m}\n"
	if err := parseScenario("s.yaml", []byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	merged := s.Spec.Faults.WithDefaults(ChaosFaults())
	if merged.API.ConflictRate != 0.1 || merged.API.ErrorRate != 0 || merged.Crashes.Interval != Duration(10*time.Minute) || merged.Cloud == nil {
		t.Errorf("merged faults %+v: the scenario's kinds kept, the others defaulted", merged)
	}
}
