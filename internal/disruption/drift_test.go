package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

func TestDrifted(t *testing.T) {
	types := replaceCatalog(t)
	stamped := func(hash, version string) map[string]string {
		return map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: version}
	}
	claim := func(annotations map[string]string, labels ...string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: annotations, Labels: map[string]string{}}}
		for i := 0; i < len(labels); i += 2 {
			nc.Labels[labels[i]] = labels[i+1]
		}
		return nc
	}
	poolWith := func(annotations map[string]string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
		np := pool()
		np.Annotations = annotations
		np.Spec.Template.Spec.Requirements = reqs
		return np
	}
	in := func(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	smallOnDemand := []string{corev1.LabelInstanceTypeStable, "small", corev1.LabelTopologyZone, "zone-a", karpv1.LabelCapacityType, "on-demand"}
	cases := []struct {
		name   string
		nc     *karpv1.NodeClaim
		np     *karpv1.NodePool
		reason string
	}{
		{"same hash", claim(stamped("1", "v3"), smallOnDemand...), poolWith(stamped("1", "v3")), ""},
		{"template changed", claim(stamped("1", "v3"), smallOnDemand...), poolWith(stamped("2", "v3")), DriftNodePool},
		{"hash version changed: not drift", claim(stamped("1", "v2"), smallOnDemand...), poolWith(stamped("2", "v3")), ""},
		{"requirement now excludes the instance type", claim(stamped("1", "v3"), smallOnDemand...),
			poolWith(stamped("1", "v3"), in(corev1.LabelInstanceTypeStable, "big", "medium")), DriftRequirements},
		{"requirement still met", claim(stamped("1", "v3"), smallOnDemand...),
			poolWith(stamped("1", "v3"), in(corev1.LabelInstanceTypeStable, "big", "small")), ""},
		{"requirement on a label the claim lacks is not judged", claim(stamped("1", "v3"), smallOnDemand...),
			poolWith(stamped("1", "v3"), in("example.com/team", "a")), ""},
		{"instance type gone", claim(stamped("1", "v3"), corev1.LabelInstanceTypeStable, "retired"), poolWith(stamped("1", "v3")), DriftInstanceTypeNotFound},
		{"offering gone", claim(stamped("1", "v3"), corev1.LabelInstanceTypeStable, "small", corev1.LabelTopologyZone, "zone-b", karpv1.LabelCapacityType, "on-demand"),
			poolWith(stamped("1", "v3")), DriftInstanceTypeNotFound},
		{"hash before requirements", claim(stamped("1", "v3"), smallOnDemand...),
			poolWith(stamped("2", "v3"), in(corev1.LabelInstanceTypeStable, "big")), DriftNodePool},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, message := Drifted(tc.nc, tc.np, types)
			if reason != tc.reason {
				t.Fatalf("Drifted = %q (%s), want %q", reason, message, tc.reason)
			}
			if reason != "" && message == "" {
				t.Error("a drift needs a message")
			}
		})
	}
}

// driftedCandidate is a candidate whose Drifted condition turned true at
// epoch minus ago.
func driftedCandidate(name string, np *karpv1.NodePool, ago time.Duration, pods ...*corev1.Pod) Candidate {
	c := candidate(name, np, time.Hour, pods...)
	c.NodeClaim.Status.Conditions = append(c.NodeClaim.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: DriftNodePool, LastTransitionTime: metav1.NewTime(epoch.Add(-ago))})
	c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: "small",
		corev1.LabelTopologyZone: "zone-a", karpv1.LabelCapacityType: "on-demand"}
	return c
}

func TestDrift(t *testing.T) {
	types := replaceCatalog(t)
	t.Run("empty drifted nodes go together, within the budget", func(t *testing.T) {
		np := underutilizedPool("2")
		a, b, c := driftedCandidate("a", np, 3*time.Minute), driftedCandidate("b", np, 2*time.Minute), driftedCandidate("c", np, time.Minute)
		fresh := candidate("fresh", np, time.Hour)
		d, err := Drift([]Candidate{c, fresh, b, a}, nil, nil, sched.Input{}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if names(d.Command.Candidates) != "a,b" || !strings.Contains(d.Stays["c"], "budget") {
			t.Errorf("takes %q, stays %v: want the two oldest drifts, c held by the budget", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("a busy drifted node is replaced by what its pods need, at any price", func(t *testing.T) {
		np := underutilizedPool("1")
		busy := driftedCandidate("busy", np, time.Minute, cpuPod("p1", "1500m"), cpuPod("p2", "1500m"))
		d, err := Drift([]Candidate{busy}, []sched.Node{schedNode(busy)}, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if names(d.Command.Candidates) != "busy" || len(d.Command.Replacements) == 0 || d.Command.Reason != karpv1.DisruptionReasonDrifted {
			t.Fatalf("command %+v, stays %v: want busy replaced", d.Command, d.Stays)
		}
	})
	t.Run("pods with nowhere to go hold a drifted node", func(t *testing.T) {
		np := underutilizedPool("1")
		busy := driftedCandidate("busy", np, time.Minute, cpuPod("huge", "64"))
		d, _ := Drift([]Candidate{busy}, []sched.Node{schedNode(busy)}, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["busy"], "pod default/huge would have no place") {
			t.Errorf("command %+v, stays %v", d.Command, d.Stays)
		}
	})
	t.Run("do-not-disrupt holds a drifted node unless the pool bounds termination", func(t *testing.T) {
		np := underutilizedPool("1")
		held := driftedCandidate("held", np, time.Minute, podOf("pinned", "ReplicaSet", map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}))
		d, _ := Drift([]Candidate{held}, nil, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["held"], "do-not-disrupt") {
			t.Fatalf("command %+v, stays %v: want held by its pod", d.Command, d.Stays)
		}
		held.NodeClaim.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		d, _ = Drift([]Candidate{held}, nil, []sched.NodePool{{NodePool: np, InstanceTypes: types}}, sched.Input{}, epoch)
		if names(d.Command.Candidates) != "held" {
			t.Errorf("with terminationGracePeriod: command %+v, stays %v: want drift to go ahead", d.Command, d.Stays)
		}
	})
	t.Run("a drifted node being disrupted counts against the budget", func(t *testing.T) {
		np := underutilizedPool("1")
		going := driftedCandidate("going", np, 2*time.Minute)
		now := metav1.NewTime(epoch)
		going.NodeClaim.DeletionTimestamp = &now
		next := driftedCandidate("next", np, time.Minute)
		d, _ := Drift([]Candidate{going, next}, nil, nil, sched.Input{}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["next"], "budget") {
			t.Errorf("command %q, stays %v", names(d.Command.Candidates), d.Stays)
		}
	})
}
