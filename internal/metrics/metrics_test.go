package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// The series carry Karpenter's names and labels, so its dashboards read
// them unchanged.
func TestSeriesUseKarpentersNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "v0.1.0", "abc")
	if err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{karpv1.LabelNodePool: "web", karpv1.LabelCapacityType: "spot", corev1.LabelTopologyZone: "zone-a"},
		Annotations: map[string]string{karpv1.AnnotationNodeClaimMinValuesRelaxed: "true"},
	}}
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(created.Add(time.Hour))
	nc.DeletionTimestamp = &deleted
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: nc.Labels, CreationTimestamp: metav1.NewTime(created), DeletionTimestamp: &deleted}}
	m.NodePool(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty}}})
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimDisrupted(nc, ReasonGarbageCollected)
	m.NodeClaimTerminated(nc, deleted.Add(40*time.Second))
	m.NodeRegistered(node)
	m.NodeTerminated(node, true, deleted.Add(20*time.Second))
	m.NodeTerminated(node, false, deleted.Add(20*time.Second))
	m.EvictionRequested(429)
	m.PodDrained(DrainReasonForceful)

	want := `
# HELP karpenter_nodeclaims_created_total Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.
# TYPE karpenter_nodeclaims_created_total counter
karpenter_nodeclaims_created_total{min_values_relaxed="true",nodepool="web",reason="provisioned"} 2
# HELP karpenter_nodeclaims_disrupted_total Number of nodeclaims disrupted, by reason, nodepool, capacity type, the pool's consolidation policy and how the node is terminated.
# TYPE karpenter_nodeclaims_disrupted_total counter
karpenter_nodeclaims_disrupted_total{capacity_type="spot",consolidation_policy="WhenEmpty",nodepool="web",reason="garbage_collected",termination_mode="forceful"} 1
# HELP karpenter_nodeclaims_terminated_total Number of nodeclaims terminated, by nodepool, capacity type and zone.
# TYPE karpenter_nodeclaims_terminated_total counter
karpenter_nodeclaims_terminated_total{capacity_type="spot",nodepool="web",zone="zone-a"} 1
# HELP karpenter_nodes_created_total Number of nodes registered, by nodepool and zone.
# TYPE karpenter_nodes_created_total counter
karpenter_nodes_created_total{nodepool="web",zone="zone-a"} 1
# HELP karpenter_nodes_drained_total Number of nodes drained, by nodepool.
# TYPE karpenter_nodes_drained_total counter
karpenter_nodes_drained_total{nodepool="web"} 1
# HELP karpenter_nodes_terminated_total Number of nodes terminated, by nodepool and zone.
# TYPE karpenter_nodes_terminated_total counter
karpenter_nodes_terminated_total{nodepool="web",zone="zone-a"} 2
# HELP karpenter_pods_eviction_requests_total Number of eviction requests, by the HTTP status code of the answer.
# TYPE karpenter_pods_eviction_requests_total counter
karpenter_pods_eviction_requests_total{code="429"} 1
# HELP karpenter_pods_drained_total Number of pods drained from terminating nodes, by the reason the node was disrupted.
# TYPE karpenter_pods_drained_total counter
karpenter_pods_drained_total{reason="Forceful Termination"} 1
`
	names := []string{"karpenter_nodeclaims_created_total", "karpenter_nodeclaims_disrupted_total", "karpenter_nodeclaims_terminated_total",
		"karpenter_nodes_created_total", "karpenter_nodes_drained_total", "karpenter_nodes_terminated_total", "karpenter_pods_eviction_requests_total", "karpenter_pods_drained_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	durations := `
# HELP karpenter_nodeclaims_termination_duration_seconds Seconds from a nodeclaim's deletion to the removal of its finalizer, by nodepool.
# TYPE karpenter_nodeclaims_termination_duration_seconds histogram
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(durations+histogram("karpenter_nodeclaims_termination_duration_seconds", 40, 1)),
		"karpenter_nodeclaims_termination_duration_seconds"); err != nil {
		t.Error(err)
	}
	if sum := gatheredSum(t, reg, "karpenter_nodes_lifetime_duration_seconds"); sum != 2*(3600+20) {
		t.Errorf("node lifetimes sum to %v s, want two nodes of 1 h 20 s", sum)
	}
	if sum := gatheredSum(t, reg, "karpenter_nodes_termination_duration_seconds"); sum != 40 {
		t.Errorf("node terminations sum to %v s, want 2 × 20 s", sum)
	}
	if n, err := testutil.GatherAndCount(reg, "karpenter_build_info"); err != nil || n != 1 {
		t.Errorf("karpenter_build_info series: %d, %v", n, err)
	}
}

// histogram renders one nodepool="web" series of count observations of v
// seconds in durationBuckets.
func histogram(name string, v float64, count int) string {
	var b strings.Builder
	for _, le := range durationBuckets {
		n := 0
		if v <= le {
			n = count
		}
		fmt.Fprintf(&b, "%s_bucket{nodepool=\"web\",le=\"%g\"} %d\n", name, le, n)
	}
	fmt.Fprintf(&b, "%s_bucket{nodepool=\"web\",le=\"+Inf\"} %d\n%s_sum{nodepool=\"web\"} %g\n%s_count{nodepool=\"web\"} %d\n",
		name, count, name, v*float64(count), name, count)
	return b.String()
}

// gatheredSum is the sum of a histogram's or summary's observations.
func gatheredSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range f.GetMetric() {
			sum += m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
		}
		return sum
	}
	t.Fatalf("no %s", name)
	return 0
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	nc := &karpv1.NodeClaim{}
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimDisrupted(nc, ReasonLaunchTimeout)
	m.NodeClaimTerminated(nc, time.Now())
	m.NodeRegistered(&corev1.Node{})
	m.NodeTerminated(&corev1.Node{}, true, time.Now())
	m.PodDrained("")
	m.NodePool(&karpv1.NodePool{})
	m.EvictionRequested(200)
	m.ObserveScheduling("provisioner", 1)
	m.DisruptionDecided(DecisionDelete, "empty", ConsolidationTypeEmpty, []string{"a"})
	m.DisruptionEvaluated("empty", ConsolidationTypeEmpty, time.Second, 1)
	m.DisruptionValidationFailed(ConsolidationTypeSingle)
	m.DisruptionQueueFailed(DecisionReplace, "drifted", "")
	m.DisruptionBudget("a", "empty", 1, 0)
}

func TestRegisteringTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, "v", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, "v", ""); err == nil {
		t.Error("a second registration in one registry succeeded")
	}
}

// The disruption loop's series carry Karpenter's names and labels.
func TestDisruptionSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "v0.1.0", "abc")
	if err != nil {
		t.Fatal(err)
	}
	m.DisruptionDecided(DecisionReplace, "underutilized", ConsolidationTypeMulti, []string{"web", "web"})
	m.DisruptionDecided(DecisionDelete, "empty", ConsolidationTypeEmpty, []string{"batch"})
	m.DisruptionEvaluated("underutilized", ConsolidationTypeSingle, 20*time.Millisecond, 7)
	m.DisruptionValidationFailed(ConsolidationTypeSingle)
	m.DisruptionQueueFailed(DecisionReplace, "drifted", "")
	m.DisruptionBudget("web", "drifted", 2, 1)
	want := `
# HELP karpenter_voluntary_disruption_decisions_total Number of disruption decisions carried out, by decision (delete or replace), reason and consolidation type.
# TYPE karpenter_voluntary_disruption_decisions_total counter
karpenter_voluntary_disruption_decisions_total{consolidation_type="empty",decision="delete",reason="empty"} 1
karpenter_voluntary_disruption_decisions_total{consolidation_type="multi",decision="replace",reason="underutilized"} 1
# HELP karpenter_voluntary_disruption_decisions_by_nodepool_total Number of disruption decisions carried out, by nodepool, decision, reason and consolidation type.
# TYPE karpenter_voluntary_disruption_decisions_by_nodepool_total counter
karpenter_voluntary_disruption_decisions_by_nodepool_total{consolidation_type="empty",decision="delete",nodepool="batch",reason="empty"} 1
karpenter_voluntary_disruption_decisions_by_nodepool_total{consolidation_type="multi",decision="replace",nodepool="web",reason="underutilized"} 2
# HELP karpenter_voluntary_disruption_eligible_nodes Number of nodes a disruption method could take at its last evaluation, by reason.
# TYPE karpenter_voluntary_disruption_eligible_nodes gauge
karpenter_voluntary_disruption_eligible_nodes{reason="underutilized"} 7
# HELP karpenter_voluntary_disruption_failed_validations_total Number of consolidation decisions dropped at validation because the cluster changed, by consolidation type.
# TYPE karpenter_voluntary_disruption_failed_validations_total counter
karpenter_voluntary_disruption_failed_validations_total{consolidation_type="single"} 1
# HELP karpenter_voluntary_disruption_queue_failures_total Number of decisions given up because a replacement failed or did not initialize in time, by decision, reason and consolidation type.
# TYPE karpenter_voluntary_disruption_queue_failures_total counter
karpenter_voluntary_disruption_queue_failures_total{consolidation_type="",decision="replace",reason="drifted"} 1
# HELP karpenter_nodepools_allowed_disruptions Number of nodes of the nodepool its budgets let be disrupted now, by reason.
# TYPE karpenter_nodepools_allowed_disruptions gauge
karpenter_nodepools_allowed_disruptions{nodepool="web",reason="drifted"} 2
# HELP karpenter_nodepools_nodes_consuming_budgets Number of the nodepool's nodes being disrupted, which count against its budgets.
# TYPE karpenter_nodepools_nodes_consuming_budgets gauge
karpenter_nodepools_nodes_consuming_budgets{nodepool="web"} 1
`
	names := []string{"karpenter_voluntary_disruption_decisions_total", "karpenter_voluntary_disruption_decisions_by_nodepool_total",
		"karpenter_voluntary_disruption_eligible_nodes", "karpenter_voluntary_disruption_failed_validations_total",
		"karpenter_voluntary_disruption_queue_failures_total", "karpenter_nodepools_allowed_disruptions", "karpenter_nodepools_nodes_consuming_budgets"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "karpenter_voluntary_disruption_decision_evaluation_duration_seconds"); err != nil || n != 1 {
		t.Errorf("evaluation duration series: %d, %v", n, err)
	}
}

// A node is counted created once per instance, however often its
// registration is seen, and again only for a new instance.
func TestNodeCountedOncePerInstance(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "v", "c")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{karpv1.LabelNodePool: "web", corev1.LabelTopologyZone: "zone-a"}
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "kwok://a"}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "kwok://b"}}
	m.NodeRegistered(a)
	m.NodeRegistered(a)
	m.NodeRegistered(b)
	want := `
# HELP karpenter_nodes_created_total Number of nodes registered, by nodepool and zone.
# TYPE karpenter_nodes_created_total counter
karpenter_nodes_created_total{nodepool="web",zone="zone-a"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_nodes_created_total"); err != nil {
		t.Error(err)
	}
}
