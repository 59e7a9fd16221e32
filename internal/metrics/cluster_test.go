package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

func cpuMem(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func boundPod(name, node, cpu string, owner string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if owner != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: name + "-owner", Controller: &yes}}
	}
	return p
}

// The gauges describe the model at scrape time: per-node allocatable and
// requests split between DaemonSet and other pods, pods by place, the
// utilisation of managed nodes and each pool's hourly cost.
func TestClusterCollectorReportsTheModel(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	cluster := state.NewCluster(clk)
	labels := map[string]string{karpv1.LabelNodePool: "web", corev1.LabelTopologyZone: "zone-a", corev1.LabelInstanceTypeStable: "m.large",
		karpv1.LabelCapacityType: "spot", corev1.LabelArchStable: "amd64"}
	cluster.UpdateNodeClaim(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: labels}, Status: karpv1.NodeClaimStatus{ProviderID: "kwok://web-1"}})
	cluster.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: corev1.NodeSpec{ProviderID: "kwok://web-1"}, Status: corev1.NodeStatus{Capacity: cpuMem("4", "16Gi"), Allocatable: cpuMem("3800m", "15Gi")}})
	cluster.UpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "static", CreationTimestamp: metav1.NewTime(now.Add(-24 * time.Hour))},
		Status: corev1.NodeStatus{Capacity: cpuMem("8", "32Gi"), Allocatable: cpuMem("8", "32Gi")}})
	// Launched, not registered yet: it is paid for already.
	cluster.UpdateNodeClaim(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Labels: labels}, Status: karpv1.NodeClaimStatus{ProviderID: "kwok://web-2"}})
	cluster.UpdatePod(boundPod("app", "web-1", "1500m", "ReplicaSet"))
	cluster.UpdatePod(boundPod("agent", "web-1", "400m", "DaemonSet"))
	cluster.UpdatePod(boundPod("db", "static", "2", ""))
	cluster.UpdatePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "waiting"}, Status: corev1.PodStatus{Phase: corev1.PodPending}})

	price := func(it, zone, ct string) (float64, bool) {
		return 0.05, it == "m.large" && zone == "zone-a" && ct == "spot"
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewClusterCollector(cluster, clk, price))

	want := `
# HELP karpenter_cluster_state_node_count Nodes in the cluster model.
# TYPE karpenter_cluster_state_node_count gauge
karpenter_cluster_state_node_count 2
# HELP karpenter_cluster_utilization_percent Requests of the pods on managed nodes as a percentage of their allocatable.
# TYPE karpenter_cluster_utilization_percent gauge
karpenter_cluster_utilization_percent{resource_type="cpu"} 50
karpenter_cluster_utilization_percent{resource_type="memory"} 0
# HELP karpenter_nodepools_cost_total Hourly price of the nodepool's nodes and launched nodeclaims.
# TYPE karpenter_nodepools_cost_total gauge
karpenter_nodepools_cost_total{nodepool="web"} 0.1
# HELP karpenter_nodes_total_daemon_requests Resources requested by the DaemonSet pods bound to the node.
# TYPE karpenter_nodes_total_daemon_requests gauge
karpenter_nodes_total_daemon_requests{arch="amd64",capacity_type="spot",instance_type="m.large",managed="true",node_name="web-1",nodepool="web",os="",phase="",region="",resource_type="cpu",zone="zone-a"} 0.4
# HELP karpenter_nodes_total_pod_requests Resources requested by the non-DaemonSet pods bound to the node.
# TYPE karpenter_nodes_total_pod_requests gauge
karpenter_nodes_total_pod_requests{arch="",capacity_type="",instance_type="",managed="false",node_name="static",nodepool="",os="",phase="",region="",resource_type="cpu",zone=""} 2
karpenter_nodes_total_pod_requests{arch="amd64",capacity_type="spot",instance_type="m.large",managed="true",node_name="web-1",nodepool="web",os="",phase="",region="",resource_type="cpu",zone="zone-a"} 1.5
# HELP karpenter_nodes_system_overhead Capacity minus allocatable: what the system reserves.
# TYPE karpenter_nodes_system_overhead gauge
karpenter_nodes_system_overhead{arch="",capacity_type="",instance_type="",managed="false",node_name="static",nodepool="",os="",phase="",region="",resource_type="cpu",zone=""} 0
karpenter_nodes_system_overhead{arch="",capacity_type="",instance_type="",managed="false",node_name="static",nodepool="",os="",phase="",region="",resource_type="memory",zone=""} 0
karpenter_nodes_system_overhead{arch="amd64",capacity_type="spot",instance_type="m.large",managed="true",node_name="web-1",nodepool="web",os="",phase="",region="",resource_type="cpu",zone="zone-a"} 0.2
karpenter_nodes_system_overhead{arch="amd64",capacity_type="spot",instance_type="m.large",managed="true",node_name="web-1",nodepool="web",os="",phase="",region="",resource_type="memory",zone="zone-a"} 1.073741824e+09
# HELP karpenter_nodes_current_lifetime_seconds Seconds since the node was created.
# TYPE karpenter_nodes_current_lifetime_seconds gauge
karpenter_nodes_current_lifetime_seconds{arch="",capacity_type="",instance_type="",managed="false",node_name="static",nodepool="",os="",phase="",region="",zone=""} 86400
karpenter_nodes_current_lifetime_seconds{arch="amd64",capacity_type="spot",instance_type="m.large",managed="true",node_name="web-1",nodepool="web",os="",phase="",region="",zone="zone-a"} 3600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_cluster_state_node_count", "karpenter_cluster_utilization_percent",
		"karpenter_nodepools_cost_total", "karpenter_nodes_total_daemon_requests", "karpenter_nodes_total_pod_requests",
		"karpenter_nodes_system_overhead", "karpenter_nodes_current_lifetime_seconds"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "karpenter_pods_state"); n != 4 {
		t.Errorf("%d karpenter_pods_state series, want one per pod (4)", n)
	}

	// A deleted node's series go with it: nothing is left to clean up.
	cluster.DeleteNode("static")
	if n, _ := testutil.GatherAndCount(reg, "karpenter_nodes_current_lifetime_seconds"); n != 1 {
		t.Errorf("%d lifetime series after a node left, want 1", n)
	}
}

// karpenter_cluster_state_synced follows the model's sync gate, and
// karpenter_cluster_state_unsynced_time_seconds counts how long the model
// has been incomplete (from its creation, and again after it fell behind).
func TestClusterStateSyncedGauges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cluster := state.NewCluster(clk)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewClusterCollector(cluster, clk, nil))
	expect := func(t *testing.T, synced int, unsynced float64) {
		t.Helper()
		want := fmt.Sprintf(`
# HELP karpenter_cluster_state_synced 1 when the cluster model has synced with the API server.
# TYPE karpenter_cluster_state_synced gauge
karpenter_cluster_state_synced %d
# HELP karpenter_cluster_state_unsynced_time_seconds Seconds the cluster model has not been synced with the API server (0 while synced); provisioning and disruption wait meanwhile.
# TYPE karpenter_cluster_state_unsynced_time_seconds gauge
karpenter_cluster_state_unsynced_time_seconds %g
`, synced, unsynced)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_cluster_state_synced", "karpenter_cluster_state_unsynced_time_seconds"); err != nil {
			t.Error(err)
		}
	}

	clk.Step(90 * time.Second)
	expect(t, 0, 90) // informers still listing since the start
	complete := false
	cluster.SetSyncedFunc(func() bool { return complete })
	clk.Step(30 * time.Second)
	expect(t, 0, 120)
	complete = true
	expect(t, 1, 0)
	clk.Step(time.Hour)
	complete = false // a NodeClaim in the API the model has not seen
	expect(t, 0, 0)
	clk.Step(5 * time.Second)
	expect(t, 0, 5)
}
