// Package metrics decorates a CloudProvider with Karpenter's cloudprovider
// metrics, so existing dashboards work unchanged:
//
//	karpenter_cloudprovider_duration_seconds{controller, method, provider}
//	karpenter_cloudprovider_errors_total{controller, method, provider, error}
//
// where error is NodeClaimNotFoundError, InsufficientCapacityError,
// NodeClassNotReadyError or "" for any other error.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Metrics are the collectors; register them once.
type Metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "karpenter", Subsystem: "cloudprovider", Name: "duration_seconds",
			Help:    "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"controller", "method", "provider"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "karpenter", Subsystem: "cloudprovider", Name: "errors_total",
			Help: "Total number of errors returned from CloudProvider calls.",
		}, []string{"controller", "method", "provider", "error"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type controllerKey struct{}

// WithController names the calling controller for the `controller` label.
func WithController(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, controllerKey{}, name)
}

func controllerOf(ctx context.Context) string {
	name, _ := ctx.Value(controllerKey{}).(string)
	return name
}

// Decorate wraps p so that every call is timed and every error counted.
func (m *Metrics) Decorate(p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
	return &decorated{inner: p, m: m}
}

type decorated struct {
	inner cloudprovider.CloudProvider
	m     *Metrics
}

// observe records one call; use as `defer d.observe(ctx, "Create", time.Now(), &err)`.
func (d *decorated) observe(ctx context.Context, method string, start time.Time, err *error) {
	labels := prometheus.Labels{"controller": controllerOf(ctx), "method": method, "provider": d.inner.Name()}
	d.m.duration.With(labels).Observe(time.Since(start).Seconds())
	if *err != nil {
		labels["error"] = cloudprovider.ErrorKind(*err)
		d.m.errors.With(labels).Inc()
	}
}

func (d *decorated) Name() string                    { return d.inner.Name() }
func (d *decorated) NodeClasses() []schema.GroupKind { return d.inner.NodeClasses() }

func (d *decorated) Create(ctx context.Context, nc *karpv1.NodeClaim) (out *karpv1.NodeClaim, err error) {
	defer d.observe(ctx, "Create", time.Now(), &err)
	return d.inner.Create(ctx, nc)
}

func (d *decorated) Delete(ctx context.Context, nc *karpv1.NodeClaim) (err error) {
	defer d.observe(ctx, "Delete", time.Now(), &err)
	return d.inner.Delete(ctx, nc)
}

func (d *decorated) Get(ctx context.Context, providerID string) (out *karpv1.NodeClaim, err error) {
	defer d.observe(ctx, "Get", time.Now(), &err)
	return d.inner.Get(ctx, providerID)
}

func (d *decorated) List(ctx context.Context) (out []*karpv1.NodeClaim, err error) {
	defer d.observe(ctx, "List", time.Now(), &err)
	return d.inner.List(ctx)
}

func (d *decorated) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) (out []*catalog.InstanceType, err error) {
	defer d.observe(ctx, "GetInstanceTypes", time.Now(), &err)
	return d.inner.GetInstanceTypes(ctx, np)
}

func (d *decorated) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (out cloudprovider.DriftReason, err error) {
	defer d.observe(ctx, "IsDrifted", time.Now(), &err)
	return d.inner.IsDrifted(ctx, nc)
}
