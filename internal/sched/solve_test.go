package sched

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/pkg/catalog"
)

// placement summarizes where each pod went: "pool/type" for new claims, the
// node name for existing capacity, "-" when unschedulable.
func placement(plan Plan) map[string]string {
	out := map[string]string{}
	for _, nc := range plan.NodeClaims {
		for _, p := range nc.Pods {
			out[p.Name] = nc.NodePool + "/" + nc.InstanceType
		}
	}
	for _, e := range plan.Existing {
		for _, p := range e.Pods {
			out[p.Name] = e.Node
		}
	}
	for _, u := range plan.Unschedulable {
		out[u.Pod.Name] = "-"
	}
	return out
}

func reasonFor(plan Plan, name string) string {
	for _, u := range plan.Unschedulable {
		if u.Pod.Name == name {
			return u.Reason
		}
	}
	return ""
}

func TestSolve(t *testing.T) {
	its := smallCatalog()
	cases := []struct {
		name       string
		in         Input
		want       map[string]string // pod -> placement
		wantClaims int
		wantReason map[string]string // pod -> text in its reason
	}{
		{
			name:       "pods share the cheapest type that holds them all",
			in:         Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi"), pod("b", "1", "1Gi"), pod("c", "1", "1Gi")}, NodePools: []NodePool{nodePool("default", its)}},
			want:       map[string]string{"a": "default/medium", "b": "default/medium", "c": "default/medium"},
			wantClaims: 1,
		},
		{
			name: "existing room is used before buying",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi"), pod("b", "3", "1Gi")},
				Nodes:     []Node{{Name: "node-1", Labels: map[string]string{"kubernetes.io/arch": "amd64"}, Allocatable: rl("cpu", "2", "memory", "8Gi", "pods", "10"), Initialized: true}},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "node-1", "b": "default/medium"},
			wantClaims: 1,
		},
		{
			name: "a node's running pods take its room",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi")},
				Nodes:     []Node{{Name: "node-1", Allocatable: rl("cpu", "2", "memory", "8Gi", "pods", "10"), Pods: []*corev1.Pod{pod("running", "1500m", "1Gi")}, Initialized: true}},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "default/small"},
			wantClaims: 1,
		},
		{
			name: "a node's NoSchedule taint keeps intolerant pods off",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi"), pod("b", "1", "1Gi", withToleration("dedicated", corev1.TaintEffectNoSchedule))},
				Nodes: []Node{{Name: "node-1", Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "10"), Initialized: true,
					Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "default/small", "b": "node-1"},
			wantClaims: 1,
		},
		{
			name: "a starting managed node's ephemeral and startup taints do not keep pods off",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi")},
				Nodes: []Node{{Name: "node-1", NodePool: "default", Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "10"),
					Taints:        []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}, {Key: "agent", Effect: corev1.TaintEffectNoSchedule}},
					StartupTaints: []corev1.Taint{{Key: "agent", Effect: corev1.TaintEffectNoSchedule}}}},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want: map[string]string{"a": "node-1"},
		},
		{
			name:       "a pool's taint is not tolerated",
			in:         Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []NodePool{nodePool("tainted", its, withTaint("dedicated", "infra", corev1.TaintEffectNoSchedule))}},
			want:       map[string]string{"a": "-"},
			wantReason: map[string]string{"a": "NodePool tainted: taint dedicated=infra:NoSchedule not tolerated"},
		},
		{
			name: "a PreferNoSchedule taint is avoided, then tolerated",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi")},
				NodePools: []NodePool{
					nodePool("soft", its, withTaint("spot-only", "", corev1.TaintEffectPreferNoSchedule), withWeight(10)),
				},
			},
			want:       map[string]string{"a": "soft/small"},
			wantClaims: 1,
		},
		{
			name: "a nodeSelector picks the pool with that label",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi", withNodeSelector("node-type", "batch"))},
				NodePools: []NodePool{
					nodePool("web", its, withLabel("node-type", "web"), withWeight(50)),
					nodePool("batch", its, withLabel("node-type", "batch")),
				},
			},
			want:       map[string]string{"a": "batch/small"},
			wantClaims: 1,
		},
		{
			name:       "a label no pool defines cannot be met",
			in:         Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi", withNodeSelector("team", "payments"))}, NodePools: []NodePool{nodePool("default", its)}},
			want:       map[string]string{"a": "-"},
			wantReason: map[string]string{"a": `NodePool default: requirements not met: label "team" does not have known values`},
		},
		{
			name: "higher weight pools are tried first",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi")},
				NodePools: []NodePool{nodePool("low", its), nodePool("high", its, withWeight(10))},
			},
			want:       map[string]string{"a": "high/small"},
			wantClaims: 1,
		},
		{
			name: "equal weights: the name later in the alphabet first",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi")},
				NodePools: []NodePool{nodePool("alpha", its), nodePool("beta", its)},
			},
			want:       map[string]string{"a": "beta/small"},
			wantClaims: 1,
		},
		{
			name: "required node-affinity terms are alternatives",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi", withRequiredTerms(
					[]corev1.NodeSelectorRequirement{expr("node.kubernetes.io/instance-type", "In", "nonexistent")},
					[]corev1.NodeSelectorRequirement{expr("node.kubernetes.io/instance-type", "In", "large")},
				))},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "default/large"},
			wantClaims: 1,
		},
		{
			name: "a preferred node affinity is honoured when it can be",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi", withPreferred(50, expr("node.kubernetes.io/instance-type", "In", "medium")))},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "default/medium"},
			wantClaims: 1,
		},
		{
			name: "an impossible preferred node affinity is dropped",
			in: Input{
				Pods:      []*corev1.Pod{pod("a", "1", "1Gi", withPreferred(50, expr("node.kubernetes.io/instance-type", "In", "nonexistent")))},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "default/small"},
			wantClaims: 1,
		},
		{
			name: "extended resources need a type that has them",
			in: Input{
				Pods: []*corev1.Pod{pod("train", "1", "1Gi", withRequests("nvidia.com/gpu", "1"))},
				NodePools: []NodePool{
					nodePool("general", its, withRequirement("node.kubernetes.io/instance-type", "In", "small", "medium", "large"), withWeight(10)),
					nodePool("gpu", its),
				},
			},
			want:       map[string]string{"train": "gpu/gpu"},
			wantClaims: 1,
		},
		{
			name: "no type has the resource: the reason names it",
			in: Input{
				Pods:      []*corev1.Pod{pod("train", "1", "1Gi", withRequests("nvidia.com/gpu", "1"))},
				NodePools: []NodePool{nodePool("general", its, withRequirement("node.kubernetes.io/instance-type", "In", "small", "medium"))},
			},
			want:       map[string]string{"train": "-"},
			wantReason: map[string]string{"train": "NodePool general: no instance type (node.kubernetes.io/instance-type In [medium small]) has enough nvidia.com/gpu (requested 1)"},
		},
		{
			name:       "a pod too large for any type",
			in:         Input{Pods: []*corev1.Pod{pod("huge", "64", "1Gi")}, NodePools: []NodePool{nodePool("default", its)}},
			want:       map[string]string{"huge": "-"},
			wantReason: map[string]string{"huge": "has enough cpu (requested 64)"},
		},
		{
			name:       "no NodePool at all",
			in:         Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}},
			want:       map[string]string{"a": "-"},
			wantReason: map[string]string{"a": "no NodePool can launch nodes"},
		},
		{
			name: "matchFields is refused with a reason",
			in: Input{
				Pods: []*corev1.Pod{pod("a", "1", "1Gi", func(p *corev1.Pod) {
					affinity(p).RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", "In", "node-1")}}}}
				})},
				NodePools: []NodePool{nodePool("default", its)},
			},
			want:       map[string]string{"a": "-"},
			wantReason: map[string]string{"a": "matchFields, which is not supported"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Solve(c.in)
			got := placement(plan)
			for podName, want := range c.want {
				if got[podName] != want {
					t.Errorf("pod %s went to %q, want %q (reason: %s)", podName, got[podName], want, reasonFor(plan, podName))
				}
			}
			if c.wantClaims != len(plan.NodeClaims) && c.wantReason == nil {
				t.Errorf("%d NodeClaims, want %d", len(plan.NodeClaims), c.wantClaims)
			}
			for podName, want := range c.wantReason {
				if r := reasonFor(plan, podName); !strings.Contains(r, want) {
					t.Errorf("reason for %s = %q, want it to contain %q", podName, r, want)
				}
			}
		})
	}
}

func TestLimitsAreNeverExceeded(t *testing.T) {
	its := smallCatalog()
	var pods []*corev1.Pod
	for i := range 10 {
		pods = append(pods, pod("p"+string(rune('a'+i)), "1500m", "1Gi"))
	}
	// 10 pods of 1.5 CPU; the pool may hold 8 CPUs. A claim counts by its
	// largest candidate type, so every launch choice stays within the limit.
	plan := Solve(Input{Pods: pods, NodePools: []NodePool{nodePool("capped", its, withLimits("cpu", "8"))}})
	worst := 0.0
	for _, nc := range plan.NodeClaims {
		largest := 0.0
		for _, name := range nc.InstanceTypeOptions {
			for _, it := range its {
				if it.Name == name {
					largest = max(largest, float64(it.Capacity.Cpu().MilliValue())/1000)
				}
			}
		}
		worst += largest
	}
	if worst > 8 {
		t.Errorf("the claims could launch %.1f CPUs, limit 8: %+v", worst, plan.NodeClaims)
	}
	if len(plan.Unschedulable) == 0 {
		t.Fatal("15 CPUs of pods were all placed under an 8 CPU limit")
	}
	if r := plan.Unschedulable[0].Reason; !strings.Contains(r, "limits exceeded") {
		t.Errorf("reason %q does not mention the limit", r)
	}

	plan = Solve(Input{Pods: pods[:3], NodePools: []NodePool{nodePool("counted", its, withLimits("nodes", "1"))}})
	if len(plan.NodeClaims) != 1 {
		t.Errorf("a pool limited to 1 node got %d claims", len(plan.NodeClaims))
	}
}

func TestUnavailableOfferingsAreNeverChosen(t *testing.T) {
	its := smallCatalog()
	in := Input{
		Pods:      []*corev1.Pod{pod("a", "1", "1Gi")},
		NodePools: []NodePool{nodePool("default", its)},
		Unavailable: func(it, zone, ct string) bool {
			return it == "small" && ct == "spot" // the cheapest offerings are out of capacity
		},
	}
	plan := Solve(in)
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("claims: %+v", plan.NodeClaims)
	}
	nc := plan.NodeClaims[0]
	if nc.InstanceType == "small" && nc.CapacityType == "spot" {
		t.Errorf("chose an unavailable offering: %s %s %s", nc.InstanceType, nc.Zone, nc.CapacityType)
	}
	if nc.InstanceType != "small" || nc.CapacityType != "on-demand" || nc.Price != 0.10 {
		t.Errorf("chose %s %s $%.3f; small on-demand at $0.10 is cheaper than medium spot at $0.14", nc.InstanceType, nc.CapacityType, nc.Price)
	}
}

func TestDaemonSetOverheadSizesNodes(t *testing.T) {
	its := smallCatalog()
	daemon := pod("logging", "1", "1Gi")
	gpuOnly := pod("gpu-driver", "500m", "256Mi", withNodeSelector("node.kubernetes.io/instance-type", "gpu"))
	// 1.5 CPU of pods + 1 CPU of logging agent no longer fit the 2 CPU type.
	plan := Solve(Input{
		Pods:          []*corev1.Pod{pod("a", "1500m", "1Gi")},
		NodePools:     []NodePool{nodePool("default", its)},
		DaemonSetPods: []*corev1.Pod{daemon, gpuOnly},
	})
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].InstanceType != "medium" {
		t.Fatalf("want one medium claim, got %+v", plan.NodeClaims)
	}
	cpu := plan.NodeClaims[0].Requests[corev1.ResourceCPU]
	if cpu.MilliValue() != 2500 {
		t.Errorf("claim requests cpu %s, want 2500m (pod plus the logging agent, not the GPU driver)", cpu.String())
	}
}

func TestClaimRequirementsRecordTheDecision(t *testing.T) {
	plan := Solve(Input{
		Pods:      []*corev1.Pod{pod("a", "1", "1Gi", withNodeSelector("topology.kubernetes.io/zone", "zone-b"))},
		NodePools: []NodePool{nodePool("default", []*catalog.InstanceType{instanceType("small", 2, 4, 0.1), instanceType("medium", 4, 8, 0.2)})},
	})
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("claims: %+v", plan.NodeClaims)
	}
	nc := plan.NodeClaims[0]
	got := map[string]string{}
	for _, r := range nc.Requirements {
		got[r.Key] = string(r.Operator) + " " + strings.Join(r.Values, ",")
	}
	want := map[string]string{
		"karpenter.sh/nodepool":            "In default",
		"topology.kubernetes.io/zone":      "In zone-b",
		"node.kubernetes.io/instance-type": "In small,medium",
		"karpenter.sh/capacity-type":       "In on-demand,spot",
	}
	for k, v := range want {
		if got[k] != v && !(k == "node.kubernetes.io/instance-type" && got[k] == "In medium,small") {
			t.Errorf("requirement %s = %q, want %q", k, got[k], v)
		}
	}
	if strings.Join(nc.InstanceTypeOptions, ",") != "small,medium" {
		t.Errorf("options %v, want cheapest first", nc.InstanceTypeOptions)
	}
	if nc.Zone != "zone-b" || nc.CapacityType != "spot" {
		t.Errorf("launch offering %s/%s, want zone-b spot", nc.Zone, nc.CapacityType)
	}
}
