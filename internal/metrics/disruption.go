package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Consolidation types label the voluntary-disruption series, as
// Karpenter's: empty (emptiness), single and multi (one or several nodes
// consolidated by one decision), "" for drift.
const (
	ConsolidationTypeEmpty  = "empty"
	ConsolidationTypeSingle = "single"
	ConsolidationTypeMulti  = "multi"
)

// Decisions label karpenter_voluntary_disruption_decisions_total.
const (
	DecisionDelete  = "delete"
	DecisionReplace = "replace"
)

// disruption holds the disruption loop's collectors.
type disruption struct {
	decisions        *prometheus.CounterVec
	decisionsByPool  *prometheus.CounterVec
	evaluation       *prometheus.HistogramVec
	eligible         *prometheus.GaugeVec
	failedValidation *prometheus.CounterVec
	queueFailures    *prometheus.CounterVec
	allowed          *prometheus.GaugeVec
	consumingBudgets *prometheus.GaugeVec
}

func newDisruption() disruption {
	gauge := func(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "karpenter", Subsystem: subsystem, Name: name, Help: help}, labels)
	}
	return disruption{
		decisions: counter("voluntary_disruption", "decisions_total",
			"Number of disruption decisions carried out, by decision (delete or replace), reason and consolidation type.", "decision", "reason", "consolidation_type"),
		decisionsByPool: counter("voluntary_disruption", "decisions_by_nodepool_total",
			"Number of disruption decisions carried out, by nodepool, decision, reason and consolidation type.", "nodepool", "decision", "reason", "consolidation_type"),
		evaluation: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "karpenter", Subsystem: "voluntary_disruption",
			Name: "decision_evaluation_duration_seconds", Help: "Duration of one disruption method's evaluation, by reason and consolidation type.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"reason", "consolidation_type"}),
		eligible: gauge("voluntary_disruption", "eligible_nodes",
			"Number of nodes a disruption method could take at its last evaluation, by reason.", "reason"),
		failedValidation: counter("voluntary_disruption", "failed_validations_total",
			"Number of consolidation decisions dropped at validation because the cluster changed, by consolidation type.", "consolidation_type"),
		queueFailures: counter("voluntary_disruption", "queue_failures_total",
			"Number of decisions given up because a replacement failed or did not initialize in time, by decision, reason and consolidation type.",
			"decision", "reason", "consolidation_type"),
		allowed: gauge("nodepools", "allowed_disruptions",
			"Number of nodes of the nodepool its budgets let be disrupted now, by reason.", "nodepool", "reason"),
		consumingBudgets: gauge("nodepools", "nodes_consuming_budgets",
			"Number of the nodepool's nodes being disrupted, which count against its budgets.", "nodepool"),
	}
}

func (d disruption) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.decisions, d.decisionsByPool, d.evaluation, d.eligible, d.failedValidation, d.queueFailures, d.allowed, d.consumingBudgets}
}

// DisruptionDecided counts a decision being carried out on pools' nodes.
func (m *Metrics) DisruptionDecided(decision, reason, consolidationType string, pools []string) {
	if m == nil {
		return
	}
	m.disruption.decisions.WithLabelValues(decision, reason, consolidationType).Inc()
	for _, p := range pools {
		m.disruption.decisionsByPool.WithLabelValues(p, decision, reason, consolidationType).Inc()
	}
}

// DisruptionEvaluated records how long a method took and how many nodes
// it could take.
func (m *Metrics) DisruptionEvaluated(reason, consolidationType string, took time.Duration, eligible int) {
	if m == nil {
		return
	}
	m.disruption.evaluation.WithLabelValues(reason, consolidationType).Observe(took.Seconds())
	m.disruption.eligible.WithLabelValues(reason).Set(float64(eligible))
}

// DisruptionValidationFailed counts a decision dropped at validation.
func (m *Metrics) DisruptionValidationFailed(consolidationType string) {
	if m == nil {
		return
	}
	m.disruption.failedValidation.WithLabelValues(consolidationType).Inc()
}

// DisruptionQueueFailed counts a decision given up on its replacements.
func (m *Metrics) DisruptionQueueFailed(decision, reason, consolidationType string) {
	if m == nil {
		return
	}
	m.disruption.queueFailures.WithLabelValues(decision, reason, consolidationType).Inc()
}

// DisruptionBudget sets how many of a pool's nodes may be disrupted now for
// reason, and how many are being disrupted.
func (m *Metrics) DisruptionBudget(pool, reason string, allowed, disrupting int) {
	if m == nil {
		return
	}
	m.disruption.allowed.WithLabelValues(pool, reason).Set(float64(allowed))
	m.disruption.consumingBudgets.WithLabelValues(pool).Set(float64(disrupting))
}
