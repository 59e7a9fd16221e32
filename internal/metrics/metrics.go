package metrics

import (
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Reasons for karpenter_nodeclaims_created_total and
// karpenter_nodeclaims_disrupted_total, as Karpenter writes them.
const (
	ReasonProvisioned          = "provisioned"
	ReasonInsufficientCapacity = "insufficient_capacity"
	ReasonNodeClassNotReady    = "nodeclass_not_ready"
	ReasonLaunchTimeout        = "launch_timeout"
	ReasonRegistrationTimeout  = "registration_timeout"
	ReasonGarbageCollected     = "garbage_collected"
)

// Metrics are the controllers' collectors.
type Metrics struct {
	nodeClaimsCreated    *prometheus.CounterVec
	nodeClaimsTerminated *prometheus.CounterVec
	nodeClaimsDisrupted  *prometheus.CounterVec
	nodesCreated         *prometheus.CounterVec
	nodesTerminated      *prometheus.CounterVec
	nodesDrained         *prometheus.CounterVec
	evictionRequests     *prometheus.CounterVec
	schedulingDuration   *prometheus.HistogramVec
	buildInfo            *prometheus.GaugeVec
	nodePoolLimit        *prometheus.GaugeVec
	nodePoolUsage        *prometheus.GaugeVec
}

func counter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "karpenter", Subsystem: subsystem, Name: name, Help: help}, labels)
}

// New creates the collectors and registers them with reg; version and
// commit label karpenter_build_info.
func New(reg prometheus.Registerer, version, commit string) (*Metrics, error) {
	m := &Metrics{
		nodeClaimsCreated: counter("nodeclaims", "created_total",
			"Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.", "reason", "nodepool", "min_values_relaxed"),
		nodeClaimsTerminated: counter("nodeclaims", "terminated_total",
			"Number of nodeclaims terminated, by nodepool, capacity type and zone.", "nodepool", "capacity_type", "zone"),
		nodeClaimsDisrupted: counter("nodeclaims", "disrupted_total",
			"Number of nodeclaims disrupted, by reason, nodepool and capacity type.", "reason", "nodepool", "capacity_type"),
		nodesCreated: counter("nodes", "created_total",
			"Number of nodes registered, by nodepool and zone.", "nodepool", "zone"),
		nodesTerminated: counter("nodes", "terminated_total",
			"Number of nodes terminated, by nodepool and zone.", "nodepool", "zone"),
		nodesDrained: counter("nodes", "drained_total",
			"Number of nodes drained, by nodepool.", "nodepool"),
		evictionRequests: counter("pods", "eviction_requests_total",
			"Number of eviction requests, by the HTTP status code of the answer.", "code"),
		schedulingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "karpenter", Subsystem: "scheduler", Name: "scheduling_duration_seconds",
			Help:    "Duration of one scheduling simulation, by controller.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"controller"}),
		nodePoolLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "karpenter", Subsystem: "nodepools", Name: "limit",
			Help: "The nodepool's limit, by resource type."}, []string{"resource_type", "nodepool"}),
		nodePoolUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "karpenter", Subsystem: "nodepools", Name: "usage",
			Help: "The capacity of the nodepool's nodes, by resource type."}, []string{"resource_type", "nodepool"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "karpenter", Name: "build_info",
			Help: "Build information: 1, labelled by version, Go version, architecture and commit."},
			[]string{"version", "goversion", "goarch", "commit"}),
	}
	for _, c := range []prometheus.Collector{m.nodeClaimsCreated, m.nodeClaimsTerminated, m.nodeClaimsDisrupted,
		m.nodesCreated, m.nodesTerminated, m.nodesDrained, m.evictionRequests, m.schedulingDuration, m.buildInfo,
		m.nodePoolLimit, m.nodePoolUsage} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.buildInfo.WithLabelValues(version, runtime.Version(), runtime.GOARCH, commit).Set(1)
	return m, nil
}

// NodeClaimCreated counts a NodeClaim the controller created for reason.
func (m *Metrics) NodeClaimCreated(nc *karpv1.NodeClaim, reason string) {
	if m == nil {
		return
	}
	relaxed := nc.Annotations[karpv1.AnnotationNodeClaimMinValuesRelaxed] == "true"
	m.nodeClaimsCreated.WithLabelValues(reason, nc.Labels[karpv1.LabelNodePool], strconv.FormatBool(relaxed)).Inc()
}

// NodeClaimTerminated counts a NodeClaim whose finalizer was removed.
func (m *Metrics) NodeClaimTerminated(nc *karpv1.NodeClaim) {
	if m == nil {
		return
	}
	m.nodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType], nc.Labels[corev1.LabelTopologyZone]).Inc()
}

// NodeClaimDisrupted counts a NodeClaim deleted by a controller for reason.
func (m *Metrics) NodeClaimDisrupted(nc *karpv1.NodeClaim, reason string) {
	if m == nil {
		return
	}
	m.nodeClaimsDisrupted.WithLabelValues(reason, nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType]).Inc()
}

// NodeRegistered counts a node that registered for its NodeClaim.
func (m *Metrics) NodeRegistered(node *corev1.Node) {
	if m == nil {
		return
	}
	m.nodesCreated.WithLabelValues(node.Labels[karpv1.LabelNodePool], node.Labels[corev1.LabelTopologyZone]).Inc()
}

// NodeTerminated counts a node released after termination; drained says
// whether it was drained first.
func (m *Metrics) NodeTerminated(node *corev1.Node, drained bool) {
	if m == nil {
		return
	}
	pool := node.Labels[karpv1.LabelNodePool]
	m.nodesTerminated.WithLabelValues(pool, node.Labels[corev1.LabelTopologyZone]).Inc()
	if drained {
		m.nodesDrained.WithLabelValues(pool).Inc()
	}
}

// EvictionRequested counts an eviction answered with HTTP status code.
func (m *Metrics) EvictionRequested(code int) {
	if m == nil {
		return
	}
	m.evictionRequests.WithLabelValues(strconv.Itoa(code)).Inc()
}

// ObserveScheduling records how long one solve of controller took.
func (m *Metrics) ObserveScheduling(controller string, seconds float64) {
	if m == nil {
		return
	}
	m.schedulingDuration.WithLabelValues(controller).Observe(seconds)
}

// NodePool sets a pool's limit and usage gauges; resources it no longer
// limits or uses disappear. Resources are in their base unit (cores,
// bytes, counts).
func (m *Metrics) NodePool(name string, limits, usage corev1.ResourceList) {
	if m == nil {
		return
	}
	m.ForgetNodePool(name)
	for r, q := range limits {
		m.nodePoolLimit.WithLabelValues(string(r), name).Set(q.AsApproximateFloat64())
	}
	for r, q := range usage {
		m.nodePoolUsage.WithLabelValues(string(r), name).Set(q.AsApproximateFloat64())
	}
}

// ForgetNodePool drops a deleted pool's gauges.
func (m *Metrics) ForgetNodePool(name string) {
	if m == nil {
		return
	}
	m.nodePoolLimit.DeletePartialMatch(prometheus.Labels{"nodepool": name})
	m.nodePoolUsage.DeletePartialMatch(prometheus.Labels{"nodepool": name})
}
