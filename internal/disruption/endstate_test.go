package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// kwokCatalog is Karpenter's kwok instance types as the cluster
// sells them: families c, s and m (2, 4 and 8 GiB per vCPU) in 12 sizes,
// in four zones, on-demand at $0.025/vCPU + $0.001/GiB and spot at 70 %
// of that; allocatable is capacity less kwok's 100m and 10Mi.
func kwokCatalog(t testing.TB) []*catalog.InstanceType {
	t.Helper()
	var entries []string
	for _, f := range []struct {
		name  string
		gibPC int
	}{{"c", 2}, {"s", 4}, {"m", 8}} {
		for _, cpu := range []int{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256} {
			mem := cpu * f.gibPC
			od := 0.025*float64(cpu) + 0.001*float64(mem)
			var offs []string
			for _, z := range []string{"a", "b", "c", "d"} {
				offs = append(offs, fmt.Sprintf(`{"capacityType": "spot", "zone": "test-zone-%s", "price": %g}, {"capacityType": "on-demand", "zone": "test-zone-%s", "price": %g}`, z, 0.7*od, z, od))
			}
			entries = append(entries, fmt.Sprintf(`{"name": "%s-%dx", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "%d", "memory": "%dGi", "pods": "110"}, "offerings": [%s]}`,
				f.name, cpu, cpu, mem, strings.Join(offs, ", ")))
		}
	}
	return parseTypes(t, "["+strings.Join(entries, ",")+"]")
}

// fleet is a cluster the test changes as the controller would: nodes
// removed, replacements added, pods moved.
type fleet struct {
	types []*catalog.InstanceType
	pool  *karpv1.NodePool
	nodes []*fleetNode
	added int
}

type fleetNode struct {
	name, instanceType, zone, capacityType string
	pods                                   []*corev1.Pod
}

func (f *fleet) typeNamed(name string) *catalog.InstanceType {
	for _, it := range f.types {
		if it.Name == name {
			return it
		}
	}
	panic("no instance type " + name)
}

func (f *fleet) price(n *fleetNode) float64 {
	for _, o := range f.typeNamed(n.instanceType).Offerings {
		if o.Zone == n.zone && o.CapacityType == n.capacityType {
			return o.Price
		}
	}
	panic("no offering for " + n.name)
}

// cost is the fleet's $/h and its nodes, for messages.
func (f *fleet) cost() (float64, string) {
	total := 0.0
	var parts []string
	for _, n := range f.nodes {
		total += f.price(n)
		parts = append(parts, fmt.Sprintf("%s(%s %s %s, %d pods)", n.name, n.instanceType, n.zone, n.capacityType, len(n.pods)))
	}
	return total, strings.Join(parts, " ")
}

func (f *fleet) schedNode(n *fleetNode) sched.Node {
	return sched.Node{Name: n.name, NodePool: f.pool.Name, Initialized: true, Pods: n.pods, Allocatable: f.typeNamed(n.instanceType).Allocatable,
		Labels: map[string]string{corev1.LabelHostname: n.name, corev1.LabelTopologyZone: n.zone, corev1.LabelInstanceTypeStable: n.instanceType,
			karpv1.LabelCapacityType: n.capacityType, karpv1.LabelNodePool: f.pool.Name}}
}

func (f *fleet) view() ([]Candidate, []sched.Node) {
	var cands []Candidate
	var cluster []sched.Node
	for _, n := range f.nodes {
		c := candidate(n.name, f.pool, 0, n.pods...)
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: f.pool.Name, corev1.LabelInstanceTypeStable: n.instanceType,
			corev1.LabelTopologyZone: n.zone, karpv1.LabelCapacityType: n.capacityType}
		cands = append(cands, c)
		cluster = append(cluster, f.schedNode(n))
	}
	return cands, cluster
}

// apply carries a command out: its replacements join, its candidates go,
// and their pods are bound where the scheduler (the solver, on the nodes
// left, buying nothing) puts them.
func (f *fleet) apply(t *testing.T, cmd Command) {
	t.Helper()
	for _, r := range cmd.Replacements {
		f.added++
		f.nodes = append(f.nodes, &fleetNode{name: fmt.Sprintf("new-%d", f.added), instanceType: r.InstanceType, zone: r.Zone, capacityType: r.CapacityType})
	}
	var evicted []*corev1.Pod
	for _, c := range cmd.Candidates {
		i := slices.IndexFunc(f.nodes, func(n *fleetNode) bool { return n.name == c.Name() })
		evicted = append(evicted, Reschedulable(f.nodes[i].pods)...)
		f.nodes = slices.Delete(f.nodes, i, i+1)
	}
	var cluster []sched.Node
	for _, n := range f.nodes {
		cluster = append(cluster, f.schedNode(n))
	}
	plan := sched.Solve(sched.Input{Pods: evicted, Nodes: cluster})
	if len(plan.Unschedulable) > 0 || len(plan.NodeClaims) > 0 {
		t.Fatalf("command %s: pods left without a place: %+v", names(cmd.Candidates), plan.Unschedulable)
	}
	for _, pl := range plan.Existing {
		i := slices.IndexFunc(f.nodes, func(n *fleetNode) bool { return n.name == pl.Node })
		f.nodes[i].pods = append(f.nodes[i].pods, pl.Pods...)
	}
}

// consolidate runs the loop's methods (emptiness, then consolidation)
// and carries out each command until none is left; it returns how many
// commands that took.
func (f *fleet) consolidate(t *testing.T) int {
	t.Helper()
	for commands := 0; commands < 20; commands++ {
		cands, cluster := f.view()
		d, err := Emptiness(cands, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Command.Candidates) == 0 {
			if d, err = Underutilized(cands, cluster, []sched.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}, sched.Input{}, DefaultPolicy, epoch); err != nil {
				t.Fatal(err)
			}
		}
		if len(d.Command.Candidates) == 0 {
			return commands
		}
		f.apply(t, d.Command)
	}
	t.Fatal("consolidation does not settle in 20 commands")
	return 0
}

// scaledDown is the end of a ReplicaSet scale-down as the cluster
// leaves it: nodes of every size, the big ones spot, each left with a few
// 1-CPU pods of the Deployment and of a zone-spread one.
func scaledDown(t testing.TB, shape []scaledNode) *fleet {
	f := &fleet{types: kwokCatalog(t), pool: underutilizedPool("100%")}
	yes := true
	pod := func(app, name string, spread bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: app, UID: types.UID(app), Controller: &yes}}}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}}}}
		if spread {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		}
		return p
	}
	for i, s := range shape {
		n := &fleetNode{name: fmt.Sprintf("n%02d-%s", i, s.instanceType), instanceType: s.instanceType, zone: "test-zone-" + s.zone, capacityType: s.capacityType}
		for j := range s.load {
			n.pods = append(n.pods, pod("load", fmt.Sprintf("%s-load-%d", n.name, j), false))
		}
		for j := range s.spread {
			n.pods = append(n.pods, pod("spread", fmt.Sprintf("%s-spread-%d", n.name, j), true))
		}
		f.nodes = append(f.nodes, n)
	}
	return f
}

type scaledNode struct {
	instanceType, zone, capacityType string
	load, spread                     int
}

// Repeated consolidation commands, carried out, must reach an end state
// no dearer than a packing worked out by hand, and in a few commands:
// the big, nearly empty spot nodes go (no replacement may take a spot
// node with spot-to-spot off, so keeping them would be for good), not
// the small ones into them.
func TestConsolidationReachesTheCheapestEndState(t *testing.T) {
	const spot, od = karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand
	cases := []struct {
		name  string
		shape []scaledNode
		// best is a known-good end state's $/h, worked out by hand.
		best        float64
		maxCommands int
	}{{
		// 42 pods (9 spread over 4 zones): one node per zone is needed
		// for the spread, and c-32 a (31 pods) + c-8 b (7) + c-4 c (3) +
		// c-16 d (15) hold them: 0.7×0.027×(32+8+4+16) = $1.134/h.
		name: "eleven mixed nodes, big spot ones nearly empty",
		shape: []scaledNode{
			{"c-192x", "a", spot, 6, 1}, {"c-128x", "b", spot, 5, 1}, {"c-128x", "c", spot, 5, 1}, {"c-96x", "d", spot, 4, 1},
			{"c-32x", "a", spot, 3, 1}, {"c-32x", "b", spot, 3, 1}, {"c-32x", "c", od, 2, 1}, {"c-16x", "d", spot, 2, 1},
			{"c-8x", "a", spot, 1, 1}, {"c-8x", "b", spot, 1, 0}, {"c-4x", "c", spot, 1, 0},
		},
		best:        1.134,
		maxCommands: 3,
	}, {
		// The 500-pod run scaled to 10 %: 60 pods (10 spread over 4
		// zones). One c-32 per zone holds them: 4×0.6048 = $2.4192/h
		// (today's planner kept a c-128 and the c-96: $4.99/h). Cheaper
		// still is c-32 a, b, c and the c-8 for zone d ($1.9656/h), which
		// the greedy orders miss (moved pods fill the c-8 first, and then
		// the zone-d c-32's spread pod has no room left in its zone).
		name: "the 500-pod run at 10 %",
		shape: []scaledNode{
			{"c-128x", "a", spot, 7, 2}, {"c-128x", "a", spot, 7, 1}, {"c-128x", "a", spot, 7, 1}, {"c-128x", "a", spot, 6, 0},
			{"c-96x", "b", spot, 6, 2}, {"c-32x", "a", spot, 3, 0}, {"c-32x", "b", spot, 3, 1}, {"c-32x", "c", spot, 3, 2},
			{"c-32x", "d", spot, 3, 1}, {"c-8x", "d", spot, 5, 0},
		},
		best:        2.4192,
		maxCommands: 3,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := scaledDown(t, tc.shape)
			before, _ := f.cost()
			commands := f.consolidate(t)
			after, nodes := f.cost()
			t.Logf("$%.4f/h → $%.4f/h in %d commands: %s", before, after, commands, nodes)
			if after > tc.best+1e-6 {
				t.Errorf("consolidation ends at $%.4f/h (%s), want at most $%.4f/h", after, nodes, tc.best)
			}
			if commands > tc.maxCommands {
				t.Errorf("consolidation took %d commands, want at most %d", commands, tc.maxCommands)
			}
		})
	}
}
