package metrics

import "github.com/prometheus/client_golang/prometheus"

// interruption are the metrics of a provider's interruption queue.
type interruption struct {
	received *prometheus.CounterVec
	deleted  prometheus.Counter
	queued   prometheus.Histogram
}

func newInterruption() interruption {
	return interruption{
		received: counter("interruption", "received_messages_total", "Number of interruption queue messages received, by message type.", "message_type"),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "karpenter", Subsystem: "interruption", Name: "deleted_messages_total",
			Help: "Number of interruption queue messages deleted."}),
		queued: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "karpenter", Subsystem: "interruption", Name: "message_queue_duration_seconds",
			Help: "Seconds from a message's arrival in the queue to its handling.", Buckets: prometheus.ExponentialBuckets(0.1, 2, 14)}),
	}
}

func (i interruption) collectors() []prometheus.Collector {
	return []prometheus.Collector{i.received, i.deleted, i.queued}
}

// InterruptionReceived counts a queue message of a type, seconds after it
// was queued.
func (m *Metrics) InterruptionReceived(messageType string, queuedSeconds float64) {
	if m == nil {
		return
	}
	m.interruption.received.WithLabelValues(messageType).Inc()
	m.interruption.queued.Observe(queuedSeconds)
}

// InterruptionDeleted counts a queue message deleted once handled.
func (m *Metrics) InterruptionDeleted() {
	if m == nil {
		return
	}
	m.interruption.deleted.Inc()
}
