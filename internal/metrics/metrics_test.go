package metrics

import (
	"strings"
	"testing"

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
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: nc.Labels}}
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimDisrupted(nc, ReasonGarbageCollected)
	m.NodeClaimTerminated(nc)
	m.NodeRegistered(node)
	m.NodeTerminated(node, true)
	m.NodeTerminated(node, false)
	m.EvictionRequested(429)

	want := `
# HELP karpenter_nodeclaims_created_total Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.
# TYPE karpenter_nodeclaims_created_total counter
karpenter_nodeclaims_created_total{min_values_relaxed="true",nodepool="web",reason="provisioned"} 2
# HELP karpenter_nodeclaims_disrupted_total Number of nodeclaims disrupted, by reason, nodepool and capacity type.
# TYPE karpenter_nodeclaims_disrupted_total counter
karpenter_nodeclaims_disrupted_total{capacity_type="spot",nodepool="web",reason="garbage_collected"} 1
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
`
	names := []string{"karpenter_nodeclaims_created_total", "karpenter_nodeclaims_disrupted_total", "karpenter_nodeclaims_terminated_total",
		"karpenter_nodes_created_total", "karpenter_nodes_drained_total", "karpenter_nodes_terminated_total", "karpenter_pods_eviction_requests_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "karpenter_build_info"); err != nil || n != 1 {
		t.Errorf("karpenter_build_info series: %d, %v", n, err)
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	nc := &karpv1.NodeClaim{}
	m.NodeClaimCreated(nc, ReasonProvisioned)
	m.NodeClaimDisrupted(nc, ReasonLaunchTimeout)
	m.NodeClaimTerminated(nc)
	m.NodeRegistered(&corev1.Node{})
	m.NodeTerminated(&corev1.Node{}, true)
	m.EvictionRequested(200)
	m.ObserveScheduling("provisioner", 1)
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
