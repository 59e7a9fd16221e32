package nodepool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/metrics"
)

// The pool's limit and usage are exported as Karpenter's gauges, and
// dropped with the pool.
func TestReconcileExportsLimitAndUsage(t *testing.T) {
	s := testScheme(t)
	np := pool(func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.LabelNodePool: np.Name}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodePool{}).WithObjects(np, node).Build()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	controller := New(kube, clocktesting.NewFakeClock(time.Now()), m)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(np)}
	if _, err := controller.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP karpenter_nodepools_limit The nodepool's limit, by resource type.
# TYPE karpenter_nodepools_limit gauge
karpenter_nodepools_limit{nodepool="default",resource_type="cpu"} 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_nodepools_limit"); err != nil {
		t.Error(err)
	}
	usage := `
# HELP karpenter_nodepools_usage The capacity of the nodepool's nodes, by resource type.
# TYPE karpenter_nodepools_usage gauge
karpenter_nodepools_usage{nodepool="default",resource_type="cpu"} 4
karpenter_nodepools_usage{nodepool="default",resource_type="ephemeral-storage"} 0
karpenter_nodepools_usage{nodepool="default",resource_type="memory"} 0
karpenter_nodepools_usage{nodepool="default",resource_type="nodes"} 1
karpenter_nodepools_usage{nodepool="default",resource_type="pods"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(usage), "karpenter_nodepools_usage"); err != nil {
		t.Error(err)
	}
	if err := kube.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	if _, err := controller.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "karpenter_nodepools_limit", "karpenter_nodepools_usage"); n != 0 {
		t.Errorf("%d nodepool series left after the pool was deleted", n)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
