package nodepool

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
)

func mustHash(t *testing.T, np *karpv1.NodePool) string {
	t.Helper()
	h, err := Hash(np)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Template edits that change the nodes drift them (the hash changes);
// requirements, budgets and list order do not.
func TestHashChangesWithTheNodesTemplateOnly(t *testing.T) {
	taintA := corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoSchedule}
	taintB := corev1.Taint{Key: "b", Effect: corev1.TaintEffectNoSchedule}
	base := pool(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{taintA, taintB}
		np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "web"}
	})
	cases := []struct {
		name    string
		mutate  func(*karpv1.NodePool)
		drifted bool
	}{
		{"a label", func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = "api" }, true},
		{"an annotation", func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"x": "y"} }, true},
		{"a taint", func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{taintA} }, true},
		{"the nodeclass name", func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }, true},
		{"expireAfter", func(np *karpv1.NodePool) { np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("24h") }, true},
		{"terminationGracePeriod", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		}, true},
		{"the taints' order", func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{taintB, taintA} }, false},
		{"requirements", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}
		}, false},
		{"budgets and limits", func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "5%"}}
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
		}, false},
		{"weight", func(np *karpv1.NodePool) { weight := int32(10); np.Spec.Weight = &weight }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.mutate(changed)
			if drifted := mustHash(t, changed) != mustHash(t, base); drifted != tc.drifted {
				t.Errorf("changing %s: hash changed %v, want %v", tc.name, drifted, tc.drifted)
			}
		})
	}
}

// The controller stamps the pool, and re-stamps NodeClaims of an older hash
// version with the current hash (a version bump must not drift them), but
// leaves NodeClaims of the current version alone.
func TestReconcileStampsTheHash(t *testing.T) {
	s := testScheme(t)
	np := pool(func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	})
	claim := func(name, hash, version string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: np.Name},
			Annotations: map[string]string{karpv1.AnnotationNodePoolHash: hash, karpv1.AnnotationNodePoolHashVersion: version}}}
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodePool{}).
		WithObjects(np, claim("old-version", "123", "v2"), claim("current", "456", HashVersion)).Build()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	controller := New(kube, clocktesting.NewFakeClock(time.Now()), m)
	if _, err := controller.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(np)}); err != nil {
		t.Fatal(err)
	}
	want := mustHash(t, np)
	got := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[karpv1.AnnotationNodePoolHash] != want || got.Annotations[karpv1.AnnotationNodePoolHashVersion] != HashVersion {
		t.Errorf("nodepool annotations %v, want hash %s version %s", got.Annotations, want, HashVersion)
	}
	for name, wantHash := range map[string]string{"old-version": want, "current": "456"} {
		nc := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			t.Fatal(err)
		}
		if nc.Annotations[karpv1.AnnotationNodePoolHash] != wantHash || nc.Annotations[karpv1.AnnotationNodePoolHashVersion] != HashVersion {
			t.Errorf("nodeclaim %s annotations %v, want hash %s version %s", name, nc.Annotations, wantHash, HashVersion)
		}
	}
}
