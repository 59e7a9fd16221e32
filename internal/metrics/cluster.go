package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// Pricer returns the hourly price of an offering, if known.
type Pricer func(instanceType, zone, capacityType string) (float64, bool)

// ClusterCollector reports the cluster model as Karpenter's gauges, read at
// scrape time so a series never outlives its node or pod:
// karpenter_nodes_* (allocatable, pod and daemon requests and limits,
// system overhead, current lifetime), karpenter_pods_state,
// karpenter_cluster_state_node_count, karpenter_cluster_state_synced,
// karpenter_cluster_state_unsynced_time_seconds,
// karpenter_cluster_utilization_percent and karpenter_nodepools_cost_total.
type ClusterCollector struct {
	cluster *state.Cluster
	clock   clock.PassiveClock
	price   Pricer

	allocatable, podRequests, podLimits, daemonRequests, daemonLimits, overhead, lifetime *prometheus.Desc
	podState, nodeCount, syncedDesc, unsyncedTime, utilization, cost                      *prometheus.Desc
}

// nodeLabels: the well-known node labels Karpenter exports, snake-cased,
// in order.
var nodeLabels = []struct{ key, name string }{
	{karpv1.LabelNodePool, "nodepool"},
	{corev1.LabelTopologyZone, "zone"},
	{corev1.LabelTopologyRegion, "region"},
	{corev1.LabelInstanceTypeStable, "instance_type"},
	{corev1.LabelArchStable, "arch"},
	{corev1.LabelOSStable, "os"},
	{karpv1.LabelCapacityType, "capacity_type"},
}

// NewClusterCollector reports cluster; price may be nil (no cost series).
func NewClusterCollector(cluster *state.Cluster, clk clock.PassiveClock, price Pricer) *ClusterCollector {
	nodeKeys := []string{"node_name", "phase", "managed"}
	for _, l := range nodeLabels {
		nodeKeys = append(nodeKeys, l.name)
	}
	withResource := append([]string{"resource_type"}, nodeKeys...)
	desc := func(subsystem, name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("karpenter", subsystem, name), help, labels, nil)
	}
	return &ClusterCollector{
		cluster: cluster, clock: clk, price: price,
		allocatable:    desc("nodes", "allocatable", "Node allocatable: the resources available to pods.", withResource),
		podRequests:    desc("nodes", "total_pod_requests", "Resources requested by the non-DaemonSet pods bound to the node.", withResource),
		podLimits:      desc("nodes", "total_pod_limits", "Resource limits of the non-DaemonSet pods bound to the node.", withResource),
		daemonRequests: desc("nodes", "total_daemon_requests", "Resources requested by the DaemonSet pods bound to the node.", withResource),
		daemonLimits:   desc("nodes", "total_daemon_limits", "Resource limits of the DaemonSet pods bound to the node.", withResource),
		overhead:       desc("nodes", "system_overhead", "Capacity minus allocatable: what the system reserves.", withResource),
		lifetime:       desc("nodes", "current_lifetime_seconds", "Seconds since the node was created.", nodeKeys),
		podState: desc("pods", "state", "Pods known to the cluster, 1 each, labelled by where they are and how they are.",
			[]string{"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "ready", "managed"}),
		nodeCount:  desc("cluster_state", "node_count", "Nodes in the cluster model.", nil),
		syncedDesc: desc("cluster_state", "synced", "1 when the cluster model has synced with the API server.", nil),
		unsyncedTime: desc("cluster_state", "unsynced_time_seconds",
			"Seconds the cluster model has not been synced with the API server (0 while synced); provisioning and disruption wait meanwhile.", nil),
		utilization: desc("cluster", "utilization_percent", "Requests of the pods on managed nodes as a percentage of their allocatable.", []string{"resource_type"}),
		cost:        desc("nodepools", "cost_total", "Hourly price of the nodepool's nodes and launched nodeclaims.", []string{"nodepool"}),
	}
}

// Describe sends every descriptor.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.allocatable, c.podRequests, c.podLimits, c.daemonRequests, c.daemonLimits, c.overhead,
		c.lifetime, c.podState, c.nodeCount, c.syncedDesc, c.unsyncedTime, c.utilization, c.cost} {
		ch <- d
	}
}

// Collect reads the model once and sends every series.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	inv := c.cluster.Inventory()
	now := c.clock.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	usedRequests, usedAllocatable := corev1.ResourceList{}, corev1.ResourceList{}
	cost := map[string]float64{}
	nodeOf := map[string]*corev1.Node{}
	for _, v := range inv.Nodes {
		n := v.Node
		nodeOf[n.Name] = n
		managed := v.Claim != nil || n.Labels[karpv1.LabelNodePool] != ""
		labels := []string{n.Name, string(n.Status.Phase), strconv.FormatBool(managed)}
		for _, l := range nodeLabels {
			labels = append(labels, n.Labels[l.key])
		}
		podReq, podLim, dsReq, dsLim := corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}
		for _, p := range v.Pods {
			req, lim := podResources(p)
			if ownedByDaemonSet(p) {
				add(dsReq, req)
				add(dsLim, lim)
			} else {
				add(podReq, req)
				add(podLim, lim)
			}
		}
		overhead := corev1.ResourceList{}
		for r, q := range n.Status.Capacity {
			o := q.DeepCopy()
			if a, ok := n.Status.Allocatable[r]; ok {
				o.Sub(a)
			}
			overhead[r] = o
		}
		for _, s := range []struct {
			d    *prometheus.Desc
			list corev1.ResourceList
		}{{c.allocatable, n.Status.Allocatable}, {c.podRequests, podReq}, {c.podLimits, podLim}, {c.daemonRequests, dsReq}, {c.daemonLimits, dsLim}, {c.overhead, overhead}} {
			for r, q := range s.list {
				gauge(s.d, q.AsApproximateFloat64(), append([]string{string(r)}, labels...)...)
			}
		}
		gauge(c.lifetime, now.Sub(n.CreationTimestamp.Time).Seconds(), labels...)
		if managed {
			add(usedRequests, podReq)
			add(usedRequests, dsReq)
			add(usedAllocatable, n.Status.Allocatable)
			c.addCost(cost, n.Labels)
		}
	}
	for _, nc := range inv.Pending {
		if nc.DeletionTimestamp == nil && nc.Status.ProviderID != "" {
			c.addCost(cost, nc.Labels)
		}
	}
	for pool, dollars := range cost {
		gauge(c.cost, dollars, pool)
	}
	for r, a := range usedAllocatable {
		if a.IsZero() {
			continue
		}
		req := usedRequests[r]
		gauge(c.utilization, 100*req.AsApproximateFloat64()/a.AsApproximateFloat64(), string(r))
	}
	for _, p := range inv.Pods {
		n := nodeOf[p.Spec.NodeName]
		var nl map[string]string
		if n != nil {
			nl = n.Labels
		}
		gauge(c.podState, 1, p.Name, p.Namespace, owner(p), p.Spec.NodeName, strconv.FormatBool(p.Spec.NodeName != ""),
			nl[karpv1.LabelNodePool], nl[corev1.LabelTopologyZone], nl[corev1.LabelArchStable], nl[karpv1.LabelCapacityType],
			nl[corev1.LabelInstanceTypeStable], string(p.Status.Phase), strconv.FormatBool(podReady(p)), strconv.FormatBool(nl[karpv1.LabelNodePool] != ""))
	}
	gauge(c.nodeCount, float64(len(inv.Nodes)))
	synced := 0.0
	if c.cluster.Synced() {
		synced = 1
	}
	gauge(c.syncedDesc, synced)
	gauge(c.unsyncedTime, c.cluster.UnsyncedFor().Seconds())
}

func (c *ClusterCollector) addCost(cost map[string]float64, labels map[string]string) {
	pool := labels[karpv1.LabelNodePool]
	if c.price == nil || pool == "" {
		return
	}
	if p, ok := c.price(labels[corev1.LabelInstanceTypeStable], labels[corev1.LabelTopologyZone], labels[karpv1.LabelCapacityType]); ok {
		cost[pool] += p
	}
}

// podResources are a pod's effective requests and limits as the scheduler
// counts them (init containers, sidecars, overhead).
func podResources(p *corev1.Pod) (requests, limits corev1.ResourceList) {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}), resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
}

func add(into, from corev1.ResourceList) {
	for r, q := range from {
		sum := into[r]
		sum.Add(q)
		into[r] = sum
	}
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// owner names the pod's controller as Kind/name, or "".
func owner(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
