package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/pkg/cloudprovider/metrics"
)

// scripted returns fixed errors: a test double for the decorator only.
type scripted struct{ createErr, deleteErr error }

func (s scripted) Name() string                    { return "scripted" }
func (s scripted) NodeClasses() []schema.GroupKind { return nil }
func (s scripted) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return &karpv1.NodeClaim{}, s.createErr
}
func (s scripted) Delete(context.Context, *karpv1.NodeClaim) error { return s.deleteErr }
func (s scripted) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, errors.New("broken")
}
func (s scripted) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, nil }
func (s scripted) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*catalog.InstanceType, error) {
	return nil, nil
}
func (s scripted) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

func TestDecoratorRecordsKarpenterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Decorate(scripted{
		createErr: cloudprovider.NewInsufficientCapacityError(errors.New("no spot")),
		deleteErr: cloudprovider.NewNodeClaimNotFoundError(errors.New("gone")),
	})
	ctx := metrics.WithController(context.Background(), "nodeclaim.lifecycle")
	_, _ = p.Create(ctx, &karpv1.NodeClaim{})
	_, _ = p.Create(ctx, &karpv1.NodeClaim{})
	_ = p.Delete(ctx, &karpv1.NodeClaim{})
	_, _ = p.Get(ctx, "x")
	_, _ = p.List(ctx)

	want := `
# HELP karpenter_cloudprovider_errors_total Total number of errors returned from CloudProvider calls.
# TYPE karpenter_cloudprovider_errors_total counter
karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",error="",method="Get",provider="scripted"} 1
karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",error="InsufficientCapacityError",method="Create",provider="scripted"} 2
karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",error="NodeClaimNotFoundError",method="Delete",provider="scripted"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_cloudprovider_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "karpenter_cloudprovider_duration_seconds"); n != 4 {
		t.Errorf("%d duration series, want one per method called (Create, Delete, Get, List)", n)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Error("registering the collectors twice did not fail")
	}
}
