package metrics

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

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

// DrainReasonForceful labels karpenter_pods_drained_total for pods deleted
// because the node's termination grace period ran out.
const DrainReasonForceful = "Forceful Termination"

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
	// Durations of termination and lifetimes.
	nodeClaimTermination *prometheus.HistogramVec
	nodeTermination      *prometheus.SummaryVec
	nodeLifetime         *prometheus.HistogramVec
	podsDrained          *prometheus.CounterVec
	// disruption: the disruption loop's decisions and budgets.
	disruption   disruption
	interruption interruption

	mu       sync.Mutex
	policies map[string]string // consolidation policy per NodePool, for disrupted_total
	// registered are the instances whose node was counted created.
	registered map[string]bool
}

// durationBuckets span a second to a day.
var durationBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600, 43200, 86400}

func counter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "karpenter", Subsystem: subsystem, Name: name, Help: help}, labels)
}

// New creates the collectors and registers them with reg; version and
// commit label karpenter_build_info.
func New(reg prometheus.Registerer, version, commit string) (*Metrics, error) {
	m := &Metrics{
		policies: map[string]string{}, registered: map[string]bool{},
		nodeClaimsCreated: counter("nodeclaims", "created_total",
			"Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.", "reason", "nodepool", "min_values_relaxed"),
		nodeClaimsTerminated: counter("nodeclaims", "terminated_total",
			"Number of nodeclaims terminated, by nodepool, capacity type and zone.", "nodepool", "capacity_type", "zone"),
		nodeClaimsDisrupted: counter("nodeclaims", "disrupted_total",
			"Number of nodeclaims disrupted, by reason, nodepool, capacity type, the pool's consolidation policy and how the node is terminated.",
			"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"),
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
		nodeClaimTermination: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "karpenter", Subsystem: "nodeclaims",
			Name: "termination_duration_seconds", Help: "Seconds from a nodeclaim's deletion to the removal of its finalizer, by nodepool.",
			Buckets: durationBuckets}, []string{"nodepool"}),
		nodeTermination: prometheus.NewSummaryVec(prometheus.SummaryOpts{Namespace: "karpenter", Subsystem: "nodes",
			Name: "termination_duration_seconds", Help: "Seconds from a node's deletion to the removal of its finalizer, by nodepool.",
			Objectives: map[float64]float64{0: 0, 0.5: 0.05, 0.9: 0.01, 0.99: 0.001, 1: 0}}, []string{"nodepool"}),
		nodeLifetime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "karpenter", Subsystem: "nodes",
			Name: "lifetime_duration_seconds", Help: "Seconds from a node's creation to its termination, by nodepool.",
			Buckets: append(slices.Clone(durationBuckets), 172800, 604800, 2592000)}, []string{"nodepool"}),
		podsDrained: counter("pods", "drained_total",
			"Number of pods drained from terminating nodes, by the reason the node was disrupted.", "reason"),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "karpenter", Name: "build_info",
			Help: "Build information: 1, labelled by version, Go version, architecture and commit."},
			[]string{"version", "goversion", "goarch", "commit"}),
	}
	m.disruption = newDisruption()
	m.interruption = newInterruption()
	for _, c := range append(append(m.disruption.collectors(), m.interruption.collectors()...), m.nodeClaimsCreated, m.nodeClaimsTerminated, m.nodeClaimsDisrupted,
		m.nodesCreated, m.nodesTerminated, m.nodesDrained, m.evictionRequests, m.schedulingDuration, m.buildInfo,
		m.nodePoolLimit, m.nodePoolUsage, m.nodeClaimTermination, m.nodeTermination, m.nodeLifetime, m.podsDrained) {
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

// NodeClaimTerminated counts a NodeClaim whose finalizer was removed at
// now, and how long its termination took.
func (m *Metrics) NodeClaimTerminated(nc *karpv1.NodeClaim, now time.Time) {
	if m == nil {
		return
	}
	if nc.DeletionTimestamp != nil {
		m.nodeClaimTermination.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Observe(now.Sub(nc.DeletionTimestamp.Time).Seconds())
	}
	m.nodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType], nc.Labels[corev1.LabelTopologyZone]).Inc()
}

// Termination modes label karpenter_nodeclaims_disrupted_total: forceful
// when there is no node to drain (never registered, or its instance is
// gone), eventual when a terminationGracePeriod bounds the drain, graceful
// otherwise.
const (
	TerminationModeForceful = "forceful"
	TerminationModeEventual = "eventual"
	TerminationModeGraceful = "graceful"
)

// NodeClaimDisrupted counts a NodeClaim deleted by a controller for reason.
func (m *Metrics) NodeClaimDisrupted(nc *karpv1.NodeClaim, reason string) {
	if m == nil {
		return
	}
	mode := TerminationModeGraceful
	switch {
	case nc.Status.NodeName == "" || reason == ReasonGarbageCollected:
		mode = TerminationModeForceful
	case nc.Spec.TerminationGracePeriod != nil:
		mode = TerminationModeEventual
	}
	pool := nc.Labels[karpv1.LabelNodePool]
	m.mu.Lock()
	policy := m.policies[pool]
	m.mu.Unlock()
	m.nodeClaimsDisrupted.WithLabelValues(reason, pool, nc.Labels[karpv1.LabelCapacityType], policy, mode).Inc()
}

// NodeRegistered counts a node that registered for its NodeClaim, once
// per instance (provider ID) however many times a registration is seen,
// by however many controllers in the process, until NodeTerminated.
func (m *Metrics) NodeRegistered(node *corev1.Node) {
	if m == nil {
		return
	}
	key := node.Spec.ProviderID
	if key == "" {
		key = node.Name
	}
	m.mu.Lock()
	counted := m.registered[key]
	m.registered[key] = true
	m.mu.Unlock()
	if counted {
		return
	}
	m.nodesCreated.WithLabelValues(node.Labels[karpv1.LabelNodePool], node.Labels[corev1.LabelTopologyZone]).Inc()
}

// NodeTerminated counts a node released after termination at now, with
// how long termination took and how long the node lived; drained says
// whether it was drained first.
func (m *Metrics) NodeTerminated(node *corev1.Node, drained bool, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.registered, node.Spec.ProviderID)
	delete(m.registered, node.Name)
	m.mu.Unlock()
	pool := node.Labels[karpv1.LabelNodePool]
	if node.DeletionTimestamp != nil {
		m.nodeTermination.WithLabelValues(pool).Observe(now.Sub(node.DeletionTimestamp.Time).Seconds())
	}
	m.nodeLifetime.WithLabelValues(pool).Observe(now.Sub(node.CreationTimestamp.Time).Seconds())
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

// PodDrained counts a pod evicted or deleted to drain a node disrupted for
// reason ("Forceful Termination" when the grace period ran out).
func (m *Metrics) PodDrained(reason string) {
	if m == nil {
		return
	}
	m.podsDrained.WithLabelValues(reason).Inc()
}

// ObserveScheduling records how long one solve of controller took.
func (m *Metrics) ObserveScheduling(controller string, seconds float64) {
	if m == nil {
		return
	}
	m.schedulingDuration.WithLabelValues(controller).Observe(seconds)
}

// NodePool sets a pool's limit and usage gauges (resources it no longer
// limits or uses disappear; base units: cores, bytes, counts) and remembers
// its consolidation policy for the disruption counters.
func (m *Metrics) NodePool(np *karpv1.NodePool) {
	if m == nil {
		return
	}
	name, limits, usage := np.Name, corev1.ResourceList(np.Spec.Limits), np.Status.Resources
	m.ForgetNodePool(name)
	m.mu.Lock()
	m.policies[name] = string(np.Spec.Disruption.ConsolidationPolicy)
	m.mu.Unlock()
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
	m.mu.Lock()
	delete(m.policies, name)
	m.mu.Unlock()
	m.nodePoolLimit.DeletePartialMatch(prometheus.Labels{"nodepool": name})
	m.nodePoolUsage.DeletePartialMatch(prometheus.Labels{"nodepool": name})
}
