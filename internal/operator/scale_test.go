package operator

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Run sizes a zero Config for thousands of nodes: Karpenter's client rate
// limit instead of client-go's 5 requests a second, several workers per
// controller, the NodeClaims of a decision created together. What is set
// is kept.
func TestRunDefaultsAreSizedForScale(t *testing.T) {
	cases := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{KubeClientQPS: 200, KubeClientBurst: 300, ControllerWorkers: 20, WriteWorkers: provisioning.DefaultCreateWorkers}},
		{"set", Config{KubeClientQPS: 50, KubeClientBurst: 60, ControllerWorkers: 3, WriteWorkers: 1}, Config{KubeClientQPS: 50, KubeClientBurst: 60, ControllerWorkers: 3, WriteWorkers: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.withRunDefaults()
			if got.KubeClientQPS != tc.want.KubeClientQPS || got.KubeClientBurst != tc.want.KubeClientBurst ||
				got.ControllerWorkers != tc.want.ControllerWorkers || got.WriteWorkers != tc.want.WriteWorkers || got.Clock == nil {
				t.Errorf("qps %v burst %d workers %d create workers %d clock %v, want %v %d %d %d and a clock", got.KubeClientQPS, got.KubeClientBurst, got.ControllerWorkers,
					got.WriteWorkers, got.Clock, tc.want.KubeClientQPS, tc.want.KubeClientBurst, tc.want.ControllerWorkers, tc.want.WriteWorkers)
			}
		})
	}
}

// The client Run connects with carries the configured rate limit; the
// caller's configuration is not changed under it.
func TestClientConfigCarriesTheRateLimit(t *testing.T) {
	given := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 5, Burst: 10}
	got := clientConfig(given, Config{}.withRunDefaults())
	if got.QPS != 200 || got.Burst != 300 || got.Host != given.Host {
		t.Errorf("client config host %s qps %v burst %d, want %s 200 300", got.Host, got.QPS, got.Burst, given.Host)
	}
	if given.QPS != 5 || given.Burst != 10 {
		t.Errorf("the caller's config became qps %v burst %d", given.QPS, given.Burst)
	}
}

// The informers resync as configured: controller-runtime's default when
// unset, never when 0.
func TestManagerOptionsResync(t *testing.T) {
	never, hour := time.Duration(0), time.Hour
	for name, resync := range map[string]*time.Duration{"unset": nil, "never": &never, "hourly": &hour} {
		t.Run(name, func(t *testing.T) {
			got := managerOptions(Config{InformerResync: resync}, nil).Cache.SyncPeriod
			if (got == nil) != (resync == nil) || (got != nil && *got != *resync) {
				t.Errorf("cache sync period %v, want %v", got, resync)
			}
		})
	}
}

// buildKWOK builds the kwok components on a fake API.
func buildKWOK(t *testing.T, conf Config) *Components {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	types, err := catalog.Parse("t", []byte(`[{"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "8Gi", "pods": "20"},
	  "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	conf.CloudProvider, conf.InstanceTypes, conf.KWOKKubelet, conf.Logger = "kwok", types, true, logr.Discard()
	if conf.Clock == nil {
		conf.Clock = clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	}
	c, err := Build(conf, Dependencies{Kube: fake.NewClientBuilder().WithScheme(scheme).Build()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every controller reconciles as many objects at once as configured,
// unless it declares its own number; left at 0 (the simulator) the others
// reconcile one at a time.
func TestBuildGivesEveryControllerItsWorkers(t *testing.T) {
	declared := map[string]int{}
	for _, w := range buildKWOK(t, Config{}).Controllers {
		declared[w.Name] = w.Workers
	}
	configured := 0
	for _, w := range buildKWOK(t, Config{ControllerWorkers: 7}).Controllers {
		want := 7
		if declared[w.Name] != 0 {
			want = declared[w.Name]
		} else {
			configured++
		}
		if w.Workers != want {
			t.Errorf("controller %s has %d workers, want %d", w.Name, w.Workers, want)
		}
	}
	if configured < 5 {
		t.Errorf("%d controllers took the configured workers, want the lifecycle, nomination, termination, disruption and nodepool ones at least", configured)
	}
}

// The batch windows are the configured ones: a window closes after the
// idle gap, or at the maximum while pods keep coming.
func TestBuildShapesBatchWindows(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	c := buildKWOK(t, Config{Clock: clk, BatchIdle: 3 * time.Second, BatchMax: 7 * time.Second})
	opened := clk.Now()
	c.Batcher.Trigger()
	if at, open := c.Batcher.CloseAt(); !open || !at.Equal(opened.Add(3*time.Second)) {
		t.Errorf("a window opened at %v closes at %v (open %v), want after the 3 s idle gap", opened, at, open)
	}
	for range 3 {
		clk.Step(2 * time.Second)
		c.Batcher.Trigger()
	}
	if at, _ := c.Batcher.CloseAt(); !at.Equal(opened.Add(7 * time.Second)) {
		t.Errorf("with pods every 2 s the window closes at %v, want the 7 s maximum after %v", at, opened)
	}
}
