package sched

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// unlaunchedClaim is a NodeClaim of pool "default" not launched yet, as
// the cluster model hands it to the solver: sized by its requests, with
// its requirements (zone left open unless given).
func unlaunchedClaim(name string, requests corev1.ResourceList, reqs ...karpv1.NodeSelectorRequirementWithMinValues) Node {
	reqs = append([]karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"medium", "large"}},
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand", "spot"}},
	}, reqs...)
	return Node{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "default"}, Allocatable: requests,
		NodePool: "default", InFlight: true, Requirements: reqs}
}

func zoneIn(zones ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}
}

// placedOn maps each pod placed on an existing node (or claim) to it.
func placedOn(plan Plan) map[string]string {
	out := map[string]string{}
	for _, pl := range plan.Existing {
		for _, p := range pl.Pods {
			out[p.Name] = pl.Node
		}
	}
	return out
}

// A pod goes onto a NodeClaim not launched yet when its node affinity can
// still be met by what the claim may launch, not only by the values the
// claim has settled: otherwise a restart, or a launch slower than the
// nomination, buys it a second node.
func TestPodsGoOntoUnlaunchedClaimsTheyAreCompatibleWith(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
		// openZone: the claim leaves the zone unconstrained (else zone-a
		// or zone-b).
		openZone bool
	}{
		{"no constraint", pod("p", "1", "1Gi"), true, false},
		{"no constraint, zone left open", pod("p", "1", "1Gi"), true, true},
		{"zone NotIn, zone left open", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "zone-a")})), false, true},
		{"zone In, zone left open", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-a")})), false, true},
		{"zone NotIn one of them", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "zone-a")})), true, false},
		{"zone In both", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b")})), true, false},
		{"zone In one of them", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-b")})), true, false},
		{"zone Exists", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpExists)})), true, false},
		{"instance type In both", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "medium", "large")})), true, false},
		{"capacity type Exists", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(karpv1.LabelCapacityType, corev1.NodeSelectorOpExists)})), true, false},
		{"a zone the claim excludes", pod("p", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-c")})), false, false},
		{"an instance type the claim excludes", pod("p", "1", "1Gi", withNodeSelector(corev1.LabelInstanceTypeStable, "small")), false, false},
		{"a label the claim does not define", pod("p", "1", "1Gi", withNodeSelector("team", "web")), false, false},
		{"too big for its room", pod("p", "3", "1Gi"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := unlaunchedClaim("claim-1", rl("cpu", "2", "memory", "4Gi", "pods", "10"), zoneIn("zone-a", "zone-b"))
			if tc.openZone {
				claim = unlaunchedClaim("claim-1", rl("cpu", "2", "memory", "4Gi", "pods", "10"))
			}
			plan := Solve(Input{
				Pods:      []*corev1.Pod{tc.pod},
				Nodes:     []Node{claim},
				NodePools: []NodePool{nodePool("default", smallCatalog())},
			})
			if got := placedOn(plan)["p"] == "claim-1"; got != tc.want {
				t.Errorf("placed on the unlaunched claim: %v, want %v (plan: %d new NodeClaims, unschedulable %v)", got, tc.want, len(plan.NodeClaims), plan.Unschedulable)
			}
			if tc.want && len(plan.NodeClaims) != 0 {
				t.Errorf("bought %d NodeClaims for a pod the unlaunched claim takes", len(plan.NodeClaims))
			}
		})
	}
}

// Placing a pod settles what an unlaunched claim may be for the pods after
// it: one claim launches in one zone, so pods needing different zones do
// not share it, and a zone spread sends the next replica elsewhere.
func TestAPodPlacedNarrowsTheUnlaunchedClaim(t *testing.T) {
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	cases := []struct {
		name string
		pods []*corev1.Pod
	}{
		{"disjoint zones", []*corev1.Pod{
			pod("in-a", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-a")})),
			pod("in-b", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-b")})),
		}},
		{"disjoint instance types", []*corev1.Pod{
			pod("in-a", "1", "1Gi", withNodeSelector(corev1.LabelInstanceTypeStable, "medium")),
			pod("in-b", "1", "1Gi", withNodeSelector(corev1.LabelInstanceTypeStable, "large")),
		}},
		{"zone spread", []*corev1.Pod{
			pod("in-a", "1", "1Gi", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app)),
			pod("in-b", "1", "1Gi", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, app)),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Solve(Input{
				Pods:      tc.pods,
				Nodes:     []Node{unlaunchedClaim("claim-1", rl("cpu", "2", "memory", "4Gi", "pods", "10"), zoneIn("zone-a", "zone-b"))},
				NodePools: []NodePool{nodePool("default", smallCatalog())},
			})
			on := placedOn(plan)
			if on["in-a"] == "claim-1" && on["in-b"] == "claim-1" {
				t.Fatalf("both pods were planned onto one unlaunched claim; it can become only one node")
			}
			if (on["in-a"] == "claim-1") == (on["in-b"] == "claim-1") || len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
				t.Errorf("want one pod on the claim and one new NodeClaim; got %v on existing, %d new, unschedulable %v", on, len(plan.NodeClaims), plan.Unschedulable)
			}
		})
	}
}

// An unlaunched claim's room is what it asked for, which includes the
// DaemonSet pods that will run on it: a pod does not get their share.
func TestAnUnlaunchedClaimKeepsRoomForItsDaemonSetPods(t *testing.T) {
	daemon := pod("agent", "900m", "100Mi")
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptrTo(true)}}
	cases := []struct {
		name    string
		daemons []*corev1.Pod
		want    bool
	}{
		{"no DaemonSet", nil, true},
		{"a DaemonSet that runs on it", []*corev1.Pod{daemon}, false},
		{"a DaemonSet kept off it by node affinity", []*corev1.Pod{pod("agent", "900m", "100Mi", withNodeSelector("team", "batch"))}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Sized for the 1-CPU pod nominated onto it and the 900m agent.
			claim := unlaunchedClaim("claim-1", rl("cpu", "1900m", "memory", "4Gi", "pods", "10"))
			claim.Pods = []*corev1.Pod{pod("sized-for", "1", "100Mi")}
			plan := Solve(Input{
				Pods:          []*corev1.Pod{pod("p", "900m", "100Mi")},
				Nodes:         []Node{claim},
				NodePools:     []NodePool{nodePool("default", smallCatalog())},
				DaemonSetPods: tc.daemons,
			})
			if got := placedOn(plan)["p"] == "claim-1"; got != tc.want {
				t.Errorf("placed on the unlaunched claim: %v, want %v", got, tc.want)
			}
		})
	}
}

// A claim whose requirements cannot be read takes no pods, and the solve
// goes on (no panic): the pod gets a new NodeClaim.
func TestAnUnlaunchedClaimWithBadRequirementsTakesNoPods(t *testing.T) {
	bad := unlaunchedClaim("claim-1", rl("cpu", "2", "memory", "4Gi", "pods", "10"),
		karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/size", Operator: corev1.NodeSelectorOpGt, Values: []string{"large"}})
	plan := Solve(Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, Nodes: []Node{bad}, NodePools: []NodePool{nodePool("default", smallCatalog())}})
	if on := placedOn(plan); on["p"] != "" || len(plan.NodeClaims) != 1 {
		t.Errorf("pod placed on %q with %d new NodeClaims; want a new NodeClaim", on["p"], len(plan.NodeClaims))
	}
}
