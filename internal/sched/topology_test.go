package sched

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/pkg/catalog"
)

// zonedCatalog: one general type offered on-demand in three zones.
func zonedCatalog() []*catalog.InstanceType {
	it := instanceType("m", 8, 32, 0.4)
	it.Offerings = nil
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: "on-demand", Price: 0.4, Available: true})
	}
	return []*catalog.InstanceType{it}
}

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, sel *metav1.LabelSelector, mutate ...func(*corev1.TopologySpreadConstraint)) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: when, LabelSelector: sel}
		for _, m := range mutate {
			m(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func podAffinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func withAntiAffinity(key string, sel *metav1.LabelSelector) podOpt {
	return func(p *corev1.Pod) {
		a := podAffinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel})
	}
}

func withPreferredAntiAffinity(key string, sel *metav1.LabelSelector) podOpt {
	return func(p *corev1.Pod) {
		a := podAffinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel}})
	}
}

func withPodAffinity(key string, sel *metav1.LabelSelector, namespaceSelector *metav1.LabelSelector) podOpt {
	return func(p *corev1.Pod) {
		a := podAffinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel, NamespaceSelector: namespaceSelector})
	}
}

func replicasOf(n int, prefix, cpu string, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), cpu, "1Gi", opts...))
	}
	return out
}

// zonesOf counts pods per launch zone, and nodes used.
func zonesOf(plan Plan) (perZone map[string]int, nodes int) {
	perZone = map[string]int{}
	for _, nc := range plan.NodeClaims {
		perZone[nc.Zone] += len(nc.Pods)
	}
	return perZone, len(plan.NodeClaims)
}

func TestTopologySpread(t *testing.T) {
	its := zonedCatalog()
	app := selector("app", "web")
	cases := []struct {
		name          string
		pods          []*corev1.Pod
		nodes         []Node
		wantPerZone   map[string]int
		wantNodes     int
		unschedulable int
	}{
		{
			name:        "zone spread puts two of six pods in each zone",
			pods:        replicasOf(6, "web", "1", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app)),
			wantPerZone: map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}, wantNodes: 3,
		},
		{
			name:        "maxSkew 2 allows an uneven split, on fewer nodes",
			pods:        replicasOf(4, "web", "1", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 2, corev1.DoNotSchedule, app)),
			wantPerZone: map[string]int{"zone-a": 2, "zone-b": 2}, wantNodes: 2,
		},
		{
			name:      "hostname spread gives each pod its own node",
			pods:      replicasOf(4, "web", "500m", withLabels("app", "web"), withSpread(corev1.LabelHostname, 1, corev1.DoNotSchedule, app)),
			wantNodes: 4,
		},
		{
			name: "existing pods count: the spread fills the empty zones first",
			pods: replicasOf(2, "web", "1", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app)),
			nodes: []Node{{Name: "old", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a", corev1.LabelHostname: "old"}, Initialized: true,
				Allocatable: rl("cpu", "1", "memory", "8Gi", "pods", "10"), Pods: []*corev1.Pod{pod("running", "1", "1Gi", withLabels("app", "web"))}}},
			wantPerZone: map[string]int{"zone-b": 1, "zone-c": 1}, wantNodes: 2,
		},
		{
			name: "minDomains beyond the zones there are holds every zone to one pod",
			pods: replicasOf(5, "web", "1", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app,
				func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptrTo(int32(5)) })),
			wantPerZone: map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}, wantNodes: 3, unschedulable: 2,
		},
		{
			name: "ScheduleAnyway is honoured while it can be, then dropped",
			pods: replicasOf(4, "web", "1", withLabels("app", "web"), withNodeSelector(corev1.LabelTopologyZone, "zone-a"),
				withSpread(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, app, func(c *corev1.TopologySpreadConstraint) {
					c.NodeAffinityPolicy = ptrTo(corev1.NodeInclusionPolicyIgnore)
				})),
			wantPerZone: map[string]int{"zone-a": 4},
		},
		{
			name: "node affinity is honoured by default: only reachable zones count",
			pods: replicasOf(3, "web", "1", withLabels("app", "web"), withNodeSelector(corev1.LabelTopologyZone, "zone-a"),
				withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app)),
			wantPerZone: map[string]int{"zone-a": 3}, wantNodes: 1,
		},
		{
			name: "nodeAffinityPolicy Ignore counts unreachable zones too",
			pods: replicasOf(3, "web", "1", withLabels("app", "web"), withNodeSelector(corev1.LabelTopologyZone, "zone-a"),
				withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app, func(c *corev1.TopologySpreadConstraint) {
					c.NodeAffinityPolicy = ptrTo(corev1.NodeInclusionPolicyIgnore)
				})),
			wantPerZone: map[string]int{"zone-a": 1}, wantNodes: 1, unschedulable: 2,
		},
		{
			name: "matchLabelKeys keeps two revisions' spreads apart",
			pods: append(
				replicasOf(3, "v1", "1", withLabels("app", "web", "rev", "1"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app,
					func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"rev"} })),
				replicasOf(3, "v2", "1", withLabels("app", "web", "rev", "2"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app,
					func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"rev"} }))...),
			wantPerZone: map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2},
		},
	}
	// Each case runs with bare pods and with pods owned by a controller per
	// label set (replicas share their topology groups): same plan.
	for _, c := range cases {
		for _, owned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/owned=%v", c.name, owned), func(t *testing.T) {
				pods := c.pods
				if owned {
					pods = ownedByLabels(c.pods)
				}
				checkSpread(t, Solve(Input{Pods: pods, Nodes: c.nodes, NodePools: []NodePool{nodePool("default", its)}}), c.wantPerZone, c.wantNodes, c.unschedulable)
			})
		}
	}
}

// ownedByLabels copies pods, each owned by a controller named after its
// labels.
func ownedByLabels(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	yes := true
	for i, p := range pods {
		cp := p.DeepCopy()
		cp.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: types.UID(fmt.Sprint(p.Labels)), Controller: &yes}}
		out[i] = cp
	}
	return out
}

func checkSpread(t *testing.T, plan Plan, wantPerZone map[string]int, wantNodes, unschedulable int) {
	t.Helper()
	perZone, nodes := zonesOf(plan)
	if wantPerZone != nil && fmt.Sprint(perZone) != fmt.Sprint(wantPerZone) {
		t.Errorf("pods per zone %v, want %v", perZone, wantPerZone)
	}
	if wantNodes != 0 && nodes != wantNodes {
		t.Errorf("%d nodes, want %d", nodes, wantNodes)
	}
	if len(plan.Unschedulable) != unschedulable {
		t.Errorf("%d unschedulable, want %d: %v", len(plan.Unschedulable), unschedulable, reasons(plan))
	}
	for _, nc := range plan.NodeClaims {
		for _, r := range nc.Requirements {
			if r.Key == corev1.LabelHostname {
				t.Errorf("a placeholder hostname leaked into the claim: %v", r)
			}
		}
	}
}

func TestPodAffinityAndAntiAffinity(t *testing.T) {
	its := zonedCatalog()
	db := pod("db", "1", "1Gi", withLabels("app", "db"))
	dbNode := Node{Name: "db-node", Labels: map[string]string{corev1.LabelTopologyZone: "zone-b", corev1.LabelHostname: "db-node"}, Initialized: true,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "10"), Pods: []*corev1.Pod{db}}
	cases := []struct {
		name          string
		pods          []*corev1.Pod
		nodes         []Node
		namespaces    map[string]map[string]string
		check         func(t *testing.T, plan Plan)
		unschedulable int
	}{
		{
			name: "hostname anti-affinity among replicas: one per node",
			pods: replicasOf(4, "nginx", "500m", withLabels("app", "nginx"), withAntiAffinity(corev1.LabelHostname, selector("app", "nginx"))),
			check: func(t *testing.T, plan Plan) {
				if len(plan.NodeClaims) != 4 {
					t.Errorf("%d nodes for 4 mutually exclusive pods", len(plan.NodeClaims))
				}
			},
		},
		{
			name:          "zone anti-affinity: one per zone, the fourth has nowhere to go",
			pods:          replicasOf(4, "nginx", "500m", withLabels("app", "nginx"), withAntiAffinity(corev1.LabelTopologyZone, selector("app", "nginx"))),
			unschedulable: 1,
			check: func(t *testing.T, plan Plan) {
				if r := reasons(plan); !strings.Contains(r, "pod anti-affinity on topology.kubernetes.io/zone: every domain already holds a matching pod") {
					t.Errorf("reason: %s", r)
				}
				perZone, _ := zonesOf(plan)
				for z, n := range perZone {
					if n > 1 {
						t.Errorf("zone %s has %d pods", z, n)
					}
				}
			},
		},
		{
			name:  "hostname affinity to a running pod: onto its node",
			pods:  []*corev1.Pod{pod("cache", "1", "1Gi", withPodAffinity(corev1.LabelHostname, selector("app", "db"), nil))},
			nodes: []Node{dbNode},
			check: func(t *testing.T, plan Plan) {
				if len(plan.Existing) != 1 || plan.Existing[0].Node != "db-node" {
					t.Errorf("cache placed %v / %d claims, want on db-node", plan.Existing, len(plan.NodeClaims))
				}
			},
		},
		{
			name:  "zone affinity to a running pod: a new node in its zone",
			pods:  []*corev1.Pod{pod("cache", "8", "1Gi", withPodAffinity(corev1.LabelTopologyZone, selector("app", "db"), nil))},
			nodes: []Node{dbNode},
			check: func(t *testing.T, plan Plan) {
				if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].Zone != "zone-b" {
					t.Errorf("claims %v, want one in zone-b", plan.NodeClaims)
				}
			},
		},
		{
			name:          "affinity to pods that do not exist cannot be met",
			pods:          []*corev1.Pod{pod("orphan", "1", "1Gi", withPodAffinity(corev1.LabelTopologyZone, selector("app", "missing"), nil))},
			unschedulable: 1,
		},
		{
			name: "self affinity: the first pod picks a zone, the rest follow",
			pods: replicasOf(5, "batch", "4", withLabels("app", "batch"), withPodAffinity(corev1.LabelTopologyZone, selector("app", "batch"), nil)),
			check: func(t *testing.T, plan Plan) {
				if perZone, _ := zonesOf(plan); len(perZone) != 1 {
					t.Errorf("pods spread over zones %v, want one", perZone)
				}
			},
		},
		{
			name: "a running pod's anti-affinity keeps matching pods off its node",
			pods: []*corev1.Pod{pod("web", "1", "1Gi", withLabels("app", "web"))},
			nodes: []Node{{Name: "lonely", Labels: map[string]string{corev1.LabelHostname: "lonely"}, Initialized: true,
				Allocatable: rl("cpu", "8", "memory", "8Gi", "pods", "10"),
				Pods:        []*corev1.Pod{pod("loner", "1", "1Gi", withAntiAffinity(corev1.LabelHostname, selector("app", "web")))}}},
			check: func(t *testing.T, plan Plan) {
				if len(plan.Existing) != 0 || len(plan.NodeClaims) != 1 {
					t.Errorf("web went to %v, want a new node", plan.Existing)
				}
			},
		},
		{
			name: "preferred anti-affinity is dropped when it cannot be met",
			pods: replicasOf(3, "web", "500m", withLabels("app", "web"), withPreferredAntiAffinity(corev1.LabelHostname, selector("app", "web"))),
			nodes: []Node{{Name: "only", Labels: map[string]string{corev1.LabelHostname: "only"}, Initialized: true,
				Allocatable: rl("cpu", "8", "memory", "8Gi", "pods", "10")}},
			check: func(t *testing.T, plan Plan) {
				// One goes on the existing node; the others get their own nodes while
				// the preference holds.
				if len(plan.Existing) != 1 || len(plan.Existing[0].Pods) != 1 || len(plan.NodeClaims) != 2 {
					t.Errorf("existing %v, %d claims; want 1 pod on 'only' and 2 new nodes", plan.Existing, len(plan.NodeClaims))
				}
			},
		},
		{
			name: "namespaceSelector finds pods in labelled namespaces",
			pods: []*corev1.Pod{pod("cache", "1", "1Gi", withPodAffinity(corev1.LabelHostname, selector("app", "db"), selector("team", "data")))},
			nodes: []Node{{Name: "db-node", Labels: map[string]string{corev1.LabelHostname: "db-node"}, Initialized: true, Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "10"), Pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("db", "1", "1Gi", withLabels("app", "db"))
				p.Namespace = "data"
				return p
			}()}}},
			namespaces: map[string]map[string]string{"data": {"team": "data"}, "default": {}},
			check: func(t *testing.T, plan Plan) {
				if len(plan.Existing) != 1 {
					t.Errorf("cache was not placed next to db in the data namespace: %v, %v", plan.Existing, reasons(plan))
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Solve(Input{Pods: c.pods, Nodes: c.nodes, NodePools: []NodePool{nodePool("default", its)}, Namespaces: c.namespaces})
			if len(plan.Unschedulable) != c.unschedulable {
				t.Errorf("%d unschedulable, want %d: %v", len(plan.Unschedulable), c.unschedulable, reasons(plan))
			}
			if c.check != nil {
				c.check(t, plan)
			}
		})
	}
}

func reasons(plan Plan) string {
	var out []string
	for _, u := range plan.Unschedulable {
		out = append(out, u.Pod.Name+": "+u.Reason)
	}
	return strings.Join(out, "; ")
}

func ptrTo[T any](v T) *T { return &v }

func TestMoreTopologySemantics(t *testing.T) {
	app := selector("app", "web")
	t.Run("spread over capacity types alternates spot and on-demand", func(t *testing.T) {
		plan := Solve(Input{
			Pods:      replicasOf(4, "web", "1", withLabels("app", "web"), withSpread("karpenter.sh/capacity-type", 1, corev1.DoNotSchedule, app)),
			NodePools: []NodePool{nodePool("default", smallCatalog())},
		})
		per := map[string]int{}
		for _, nc := range plan.NodeClaims {
			per[nc.CapacityType] += len(nc.Pods)
		}
		if per["spot"] != 2 || per["on-demand"] != 2 {
			t.Errorf("pods per capacity type %v, want 2 and 2 (reasons %s)", per, reasons(plan))
		}
	})
	t.Run("nodeTaintsPolicy Honor ignores domains of nodes the pod cannot tolerate", func(t *testing.T) {
		tainted := Node{Name: "tainted", Initialized: true, Labels: map[string]string{corev1.LabelTopologyZone: "zone-c", corev1.LabelHostname: "tainted"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}, Allocatable: rl("cpu", "1", "memory", "1Gi", "pods", "10")}
		its := zonedCatalog()
		its[0].Offerings = its[0].Offerings[:2] // new nodes only in zone-a and zone-b
		spread := func(policy corev1.NodeInclusionPolicy) []*corev1.Pod {
			return replicasOf(4, "web", "1", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app,
				func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &policy }))
		}
		// Ignore (the default): zone-c counts with 0 pods, so a and b may hold one each.
		plan := Solve(Input{Pods: spread(corev1.NodeInclusionPolicyIgnore), Nodes: []Node{tainted}, NodePools: []NodePool{nodePool("default", its)}})
		if len(plan.Unschedulable) != 2 {
			t.Errorf("Ignore: %d unschedulable, want 2 (zone-c's tainted node holds the minimum at 0): %s", len(plan.Unschedulable), reasons(plan))
		}
		// Honor: zone-c does not count; a and b take two each.
		plan = Solve(Input{Pods: spread(corev1.NodeInclusionPolicyHonor), Nodes: []Node{tainted}, NodePools: []NodePool{nodePool("default", its)}})
		if len(plan.Unschedulable) != 0 {
			t.Errorf("Honor: unschedulable %s", reasons(plan))
		}
	})
	t.Run("preferred pod affinity pulls pods together while it can", func(t *testing.T) {
		pref := func(p *corev1.Pod) {
			a := podAffinity(p)
			a.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: selector("app", "db")}}}}
		}
		db := Node{Name: "db-node", Initialized: true, Labels: map[string]string{corev1.LabelTopologyZone: "zone-b", corev1.LabelHostname: "db-node"},
			Allocatable: rl("cpu", "1", "memory", "1Gi", "pods", "10"), Pods: []*corev1.Pod{pod("db", "500m", "256Mi", withLabels("app", "db"))}}
		plan := Solve(Input{Pods: []*corev1.Pod{pod("cache", "4", "1Gi", pref)}, Nodes: []Node{db}, NodePools: []NodePool{nodePool("default", zonedCatalog())}})
		if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].Zone != "zone-b" {
			t.Errorf("claims %+v, want one in db's zone-b", plan.NodeClaims)
		}
		// Without any db pod the preference cannot hold and is dropped.
		plan = Solve(Input{Pods: []*corev1.Pod{pod("cache", "4", "1Gi", pref)}, NodePools: []NodePool{nodePool("default", zonedCatalog())}})
		if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
			t.Errorf("without db: claims %d, unschedulable %s", len(plan.NodeClaims), reasons(plan))
		}
	})
}
