package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

func cpuPod(name, cpu string) *corev1.Pod {
	p := podOf(name, "ReplicaSet", nil)
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	return p
}

func underutilizedPool(budget string) *karpv1.NodePool {
	np := pool(karpv1.Budget{Nodes: budget})
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	return np
}

// schedNode is the solver's view of a candidate's node: 4 CPUs.
func schedNode(c Candidate) sched.Node {
	return sched.Node{Name: c.Node.Name, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
		Pods: c.Pods, NodePool: c.NodePool.Name, Initialized: true, Labels: map[string]string{corev1.LabelHostname: c.Node.Name}}
}

func TestUnderutilized(t *testing.T) {
	np := underutilizedPool("100%")
	light := candidate("a-light", np, time.Hour, cpuPod("a1", "1"))
	half := candidate("b-half", np, time.Hour, cpuPod("b1", "1"), cpuPod("b2", "1"))
	full := candidate("c-full", np, time.Hour, cpuPod("c1", "2"), cpuPod("c2", "1500m"))
	cands := []Candidate{full, half, light}
	cluster := []sched.Node{schedNode(light), schedNode(half), schedNode(full)}
	d, err := Underutilized(cands, cluster, nil, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	// a's pod fits on b; then b's two and a's one (3 CPUs) do not fit in
	// c's half CPU left, and c's pods never fit anywhere else.
	if got := names(d.Command.Candidates); got != "a-light" {
		t.Errorf("consolidation takes %q, want a-light only", got)
	}
	for _, name := range []string{"b-half", "c-full"} {
		if !strings.Contains(d.Stays[name], "do not have the CPU or memory free") {
			t.Errorf("%s stays because %q", name, d.Stays[name])
		}
	}
}

func TestUnderutilizedRespectsPolicyBudgetAndStartingNodes(t *testing.T) {
	t.Run("WhenEmpty keeps busy nodes", func(t *testing.T) {
		np := underutilizedPool("100%")
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		d, _ := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, nil, sched.Input{}, DefaultPolicy, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "WhenEmpty") {
			t.Errorf("takes %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("budget of zero", func(t *testing.T) {
		np := underutilizedPool("0")
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		d, _ := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, nil, sched.Input{}, DefaultPolicy, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "budget") {
			t.Errorf("takes %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("a pool with NodeClaims starting is not consolidated", func(t *testing.T) {
		np := underutilizedPool("100%")
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		a.PoolStarting, b.PoolStarting = true, true
		d, _ := Underutilized([]Candidate{a, b}, []sched.Node{schedNode(a), schedNode(b)}, nil, sched.Input{}, DefaultPolicy, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "NodeClaims starting") {
			t.Errorf("takes %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("pods are not moved onto nodes still starting", func(t *testing.T) {
		np := underutilizedPool("100%")
		a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
		starting := schedNode(b)
		starting.Initialized = false
		d, _ := Underutilized([]Candidate{a}, []sched.Node{schedNode(a), starting}, nil, sched.Input{}, DefaultPolicy, epoch)
		if len(d.Command.Candidates) != 0 {
			t.Errorf("takes %q: a's pod would wait for b to start", names(d.Command.Candidates))
		}
	})
}

func replaceCatalog(t *testing.T) []*catalog.InstanceType {
	t.Helper()
	return parseTypes(t, `[
	  {"name": "big", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "8", "memory": "32Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.40}, {"capacityType": "spot", "zone": "zone-a", "price": 0.12}]},
	  {"name": "small", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.10}]},
	  {"name": "medium", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "4", "memory": "16Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.15}]},
	  {"name": "tiny", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "1", "memory": "4Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.05}]}
	]`)
}

// A node whose pods need a node of their own is replaced by one cheaper
// NodeClaim: another instance type, at least 10 % cheaper; a spot node is
// not replaced.
func TestUnderutilizedReplacesWithACheaperNode(t *testing.T) {
	types := replaceCatalog(t)
	np := underutilizedPool("100%")
	on := func(name, instanceType, capacityType string) Candidate {
		c := candidate(name, np, time.Hour, cpuPod(name+"-1", "1"), cpuPod(name+"-2", "500m"))
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone: "zone-a", karpv1.LabelCapacityType: capacityType}
		return c
	}
	pools := []sched.NodePool{{NodePool: np, InstanceTypes: types}}
	cases := []struct {
		name, instanceType, capacityType, want, stays string
	}{
		{"on-demand big: a small one does", "big", "on-demand", "small", ""},
		{"on-demand small: nothing 10% cheaper fits", "small", "on-demand", "", "no instance type at least 10% cheaper"},
		{"spot: never replaced", "big", "spot", "", "spot-to-spot consolidation is disabled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := on("n", tc.instanceType, tc.capacityType)
			d, err := Underutilized([]Candidate{c}, []sched.Node{schedNode(c)}, pools, sched.Input{}, DefaultPolicy, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(d.Command.Replacements) != 0 || !strings.Contains(d.Stays["n"], tc.stays) {
					t.Errorf("replacements %+v, stays %q: want none, because %q", d.Command.Replacements, d.Stays["n"], tc.stays)
				}
				return
			}
			if len(d.Command.Replacements) != 1 || names(d.Command.Candidates) != "n" {
				t.Fatalf("command %+v, stays %v: want n replaced", d.Command, d.Stays)
			}
			r := d.Command.Replacements[0]
			if r.InstanceType != tc.want || slices.Contains(r.InstanceTypeOptions, tc.instanceType) {
				t.Errorf("replacement %s (options %v): want %s, never the candidate's own type", r.InstanceType, r.InstanceTypeOptions, tc.want)
			}
		})
	}
	t.Run("minimum age", func(t *testing.T) {
		c := on("n", "big", "on-demand")
		d, _ := Underutilized([]Candidate{c}, []sched.Node{schedNode(c)}, pools, sched.Input{}, Policy{MinSavings: 0.1, MinAge: 48 * time.Hour}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["n"], "younger than the minimum age") {
			t.Errorf("command %+v, stays %v", d.Command, d.Stays)
		}
	})
}

// Two nodes neither of which can go alone (the other has no room for its
// pods) are merged into one NodeClaim cheaper than both.
func TestUnderutilizedMergesNodes(t *testing.T) {
	types := replaceCatalog(t)
	np := underutilizedPool("100%")
	node := func(name string) Candidate {
		c := candidate(name, np, time.Hour, cpuPod(name+"-1", "1500m"))
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: "small",
			corev1.LabelTopologyZone: "zone-a", karpv1.LabelCapacityType: "on-demand"}
		return c
	}
	a, b := node("a"), node("b")
	small := func(c Candidate) sched.Node {
		n := schedNode(c)
		n.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
		return n
	}
	d, err := Underutilized([]Candidate{a, b}, []sched.Node{small(a), small(b)}, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if names(d.Command.Candidates) != "a,b" || len(d.Command.Replacements) != 1 {
		t.Fatalf("command %s, %d replacements, stays %v: want a and b merged onto one node", names(d.Command.Candidates), len(d.Command.Replacements), d.Stays)
	}
	// The cheapest that holds both pods: big on spot ($0.12), cheaper than
	// medium on-demand ($0.15); pinned to spot.
	r := d.Command.Replacements[0]
	if r.InstanceType != "big" || r.CapacityType != "spot" || r.Price >= 0.2*0.9 {
		t.Errorf("replacement %s %s $%.2f/h: want the cheapest, at least 10%% under $0.20/h", r.InstanceType, r.CapacityType, r.Price)
	}
	pinned := false
	for _, req := range r.Requirements {
		pinned = pinned || req.Key == karpv1.LabelCapacityType && len(req.Values) == 1 && req.Values[0] == "spot"
	}
	if !pinned {
		t.Errorf("requirements %+v: a replacement that may be spot is made spot", r.Requirements)
	}
}

// spotCatalog: n 4-CPU types, type i at $0.01×(i+1) − $0.002 per hour on spot
// (no price lands exactly on a savings threshold).
func spotCatalog(t *testing.T, n int) []*catalog.InstanceType {
	t.Helper()
	var entries []string
	for i := range n {
		entries = append(entries, fmt.Sprintf(`{"name": "t-%02d", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "4", "memory": "16Gi", "pods": "110"},
		  "offerings": [{"capacityType": "spot", "zone": "zone-a", "price": %g}, {"capacityType": "on-demand", "zone": "zone-a", "price": %g}]}`, i, 0.01*float64(i+1)-0.002, 0.05*float64(i+1)))
	}
	return parseTypes(t, "["+strings.Join(entries, ",")+"]")
}

// parseTypes reads a catalog's JSON into the instance types a pool holds.
func parseTypes(t testing.TB, js string) []*catalog.InstanceType {
	t.Helper()
	types, err := catalog.Parse("test", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*catalog.InstanceType, len(types))
	for i := range types {
		out[i] = &types[i]
	}
	return out
}

// Spot-to-spot consolidation is off unless enabled; enabled, a single spot
// node is replaced only when at least 15 cheaper types fit, and the
// replacement launches from the 15 cheapest, on spot.
func TestSpotToSpotConsolidation(t *testing.T) {
	np := underutilizedPool("100%")
	spotNode := func(instanceType string) Candidate {
		c := candidate("n", np, time.Hour, cpuPod("n-1", "1"))
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone: "zone-a", karpv1.LabelCapacityType: karpv1.CapacityTypeSpot}
		return c
	}
	cases := []struct {
		name      string
		types     int
		candidate string
		enabled   bool
		stays     string
	}{
		{"disabled", 20, "t-19", false, "spot-to-spot consolidation is disabled"},
		{"enabled, 18 cheaper types", 20, "t-19", true, ""},
		{"enabled, only 9 cheaper types", 10, "t-09", true, "needs 15 cheaper instance types that fit, got 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := spotNode(tc.candidate)
			pools := []sched.NodePool{{NodePool: np, InstanceTypes: spotCatalog(t, tc.types)}}
			policy := DefaultPolicy
			policy.SpotToSpot = tc.enabled
			d, err := Underutilized([]Candidate{c}, []sched.Node{schedNode(c)}, pools, sched.Input{}, policy, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if tc.stays != "" {
				if len(d.Command.Replacements) != 0 || !strings.Contains(d.Stays["n"], tc.stays) {
					t.Errorf("command %+v, stays %q: want none because %q", d.Command, d.Stays["n"], tc.stays)
				}
				return
			}
			if len(d.Command.Replacements) != 1 {
				t.Fatalf("command %+v, stays %v: want a spot replacement", d.Command, d.Stays)
			}
			r := d.Command.Replacements[0]
			if r.CapacityType != karpv1.CapacityTypeSpot || len(r.InstanceTypeOptions) != MinSpotToSpotOptions || r.InstanceTypeOptions[0] != "t-00" || slices.Contains(r.InstanceTypeOptions, "t-15") {
				t.Errorf("replacement %s %s, options %v: want spot, the 15 cheapest (t-00..t-14)", r.InstanceType, r.CapacityType, r.InstanceTypeOptions)
			}
			for _, req := range r.Requirements {
				if req.Key == corev1.LabelInstanceTypeStable && len(req.Values) != MinSpotToSpotOptions {
					t.Errorf("instance-type requirement %v: want the 15 options", req.Values)
				}
			}
		})
	}
}

// A node whose instance type its pool no longer offers (price unknown)
// does not stand in the way of merging the others.
func TestMergeSkipsNodesOfUnknownPrice(t *testing.T) {
	types := replaceCatalog(t)
	np := underutilizedPool("100%")
	node := func(name, instanceType string, created time.Duration) Candidate {
		c := candidate(name, np, time.Hour, cpuPod(name+"-1", "1500m"))
		c.NodeClaim.CreationTimestamp = metav1.NewTime(epoch.Add(-created))
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone: "zone-a", karpv1.LabelCapacityType: "on-demand"}
		return c
	}
	// The retired node is the oldest: first in line.
	retired, a, b := node("retired", "retired-type", 3*time.Hour), node("a", "small", 2*time.Hour), node("b", "small", time.Hour)
	small := func(c Candidate) sched.Node {
		n := schedNode(c)
		n.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
		return n
	}
	d, err := Underutilized([]Candidate{retired, a, b}, []sched.Node{small(retired), small(a), small(b)}, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if names(d.Command.Candidates) != "a,b" || len(d.Command.Replacements) != 1 {
		t.Errorf("command %s with %d replacements, stays %v: want a and b merged, the retired node left out", names(d.Command.Candidates), len(d.Command.Replacements), d.Stays)
	}
}

// A candidate whose node the cluster snapshot does not count as a
// receiver (not initialized there yet) stays, with a reason, and no panic.
func TestUnderutilizedCandidateMissingFromTheSnapshot(t *testing.T) {
	np := underutilizedPool("100%")
	a, b := candidate("a", np, time.Hour, cpuPod("a1", "1")), candidate("b", np, time.Hour)
	starting := schedNode(a)
	starting.Initialized = false
	d, err := Underutilized([]Candidate{a, b}, []sched.Node{starting, schedNode(b)}, nil, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(d.Command.Candidates, func(c Candidate) bool { return c.Name() == "a" }) || !strings.Contains(d.Stays["a"], "not a candidate") {
		t.Errorf("takes %q, stays %v: want a kept, with a reason", names(d.Command.Candidates), d.Stays)
	}
}

// A spot node is not replaced on its own (spot-to-spot is off), but it is
// merged with an on-demand node onto one cheaper NodeClaim, as Karpenter's
// multi-node consolidation does; two spot nodes are not.
func TestMergeTakesSpotNodesAlongWithOnDemand(t *testing.T) {
	const spot, od = karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand
	cases := []struct {
		name  string
		other string
		want  string
	}{
		// c-64 spot (60 pods, $1.21/h) and c-32 on-demand (29 pods,
		// $0.86/h): neither has room for the other's pods; a c-96 spot
		// ($1.81/h) holds all 89, under 90 % of $2.07/h.
		{"spot with on-demand: merged", od, "n00-c-32x,n01-c-64x"},
		{"spot with spot: kept", spot, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := scaledDown(t, []scaledNode{{"c-32x", "a", tc.other, 29, 0}, {"c-64x", "a", spot, 60, 0}})
			cands, cluster := f.view()
			d, err := Underutilized(cands, cluster, []sched.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}, sched.Input{}, DefaultPolicy, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(d.Command.Candidates); got != tc.want {
				t.Fatalf("takes %q, stays %v: want %q", got, d.Stays, tc.want)
			}
			if tc.want == "" {
				return
			}
			if len(d.Command.Replacements) != 1 || d.Command.Replacements[0].InstanceType != "c-96x" || d.Command.Replacements[0].CapacityType != spot {
				t.Errorf("replacements %+v: want one c-96x on spot", d.Command.Replacements)
			}
		})
	}
}
