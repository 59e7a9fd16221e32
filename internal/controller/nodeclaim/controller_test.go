package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/kwok"
)

var epoch = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

type env struct {
	kube        client.Client
	provider    *kwok.Provider
	clock       *clocktesting.FakeClock
	unavailable *state.UnavailableOfferings
	metrics     *prometheus.Registry
	controller  *Controller
}

func newEnv(t *testing.T, intercept ...interceptor.Funcs) env {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	builder := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&corev1.Node{}, NodeProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&karpv1.NodeClaim{}, NodeClaimProviderIDIndex, func(o client.Object) []string { return []string{o.(*karpv1.NodeClaim).Status.ProviderID} }).
		WithObjects(&kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	for _, f := range intercept {
		builder = builder.WithInterceptorFuncs(f)
	}
	kube := builder.Build()
	types, err := catalog.Parse("t", []byte(`[{"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "8Gi", "pods": "20"},
		"offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(epoch)
	provider := kwok.New(kube, types)
	unavailable := state.NewUnavailableOfferings(clk, state.DefaultUnavailableTTL)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return env{kube: kube, provider: provider, clock: clk, unavailable: unavailable, metrics: reg,
		controller: New(kube, provider, clk, unavailable, record.NewFakeRecorder(100), m)}
}

func (e env) create(t *testing.T, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-1", Labels: map[string]string{karpv1.LabelNodePool: "default"},
		CreationTimestamp: metav1.NewTime(epoch)}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"small"}}}
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	nc.Spec.StartupTaints = []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	if err := e.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func (e env) reconcile(t *testing.T, name string) (*karpv1.NodeClaim, reconcile.Result) {
	t.Helper()
	res, err := e.controller.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	nc := &karpv1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		return nil, res
	}
	return nc, res
}

func condition(nc *karpv1.NodeClaim, t string) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "-"
}

func TestLifecycleFromClaimToReadyNode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.create(t, "web-abc")

	nc, _ := e.reconcile(t, "web-abc")
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Fatalf("finalizers %v", nc.Finalizers)
	}
	if condition(nc, "Launched") != "True/Launched" || nc.Status.ProviderID != "kwok://web-abc" || nc.Labels[corev1.LabelInstanceTypeStable] != "small" {
		t.Fatalf("launch: %s, provider ID %q, labels %v", condition(nc, "Launched"), nc.Status.ProviderID, nc.Labels)
	}
	// The kwok node exists already, so it registers in the same pass: synced,
	// but not ready yet.
	if condition(nc, "Registered") != "True/Registered" || nc.Status.NodeName != "web-abc" {
		t.Fatalf("registration: %s, node %q", condition(nc, "Registered"), nc.Status.NodeName)
	}
	if condition(nc, "Initialized") != "Unknown/NodeNotReady" || condition(nc, "Ready") != "Unknown/NotReady" {
		t.Errorf("before the node is ready: initialized %s, ready %s", condition(nc, "Initialized"), condition(nc, "Ready"))
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[karpv1.LabelNodeRegistered] != "true" || node.Labels[karpv1.LabelNodePool] != "default" || len(node.OwnerReferences) != 1 || node.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Errorf("registered node: labels %v owners %v finalizers %v", node.Labels, node.OwnerReferences, node.Finalizers)
	}
	keys := map[string]bool{}
	for _, taint := range node.Spec.Taints {
		keys[taint.Key] = true
	}
	if keys[karpv1.TaintKeyUnregistered] || !keys["dedicated"] || !keys["agent-not-ready"] {
		t.Errorf("node taints after registration: %v", node.Spec.Taints)
	}

	// The kubelet reports Ready; the startup taint is still there.
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := e.kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc, _ = e.reconcile(t, "web-abc")
	if condition(nc, "Initialized") != "Unknown/StartupTaintsExist" {
		t.Errorf("with the startup taint: %s", condition(nc, "Initialized"))
	}
	// The agent removes its startup taint: initialized and ready.
	var kept []corev1.Taint
	for _, taint := range node.Spec.Taints {
		if taint.Key != "agent-not-ready" {
			kept = append(kept, taint)
		}
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = kept
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc, res := e.reconcile(t, "web-abc")
	if condition(nc, "Initialized") != "True/Initialized" || condition(nc, "Ready") != "True/Ready" || res.RequeueAfter != 0 {
		t.Errorf("initialized %s, ready %s, requeue %v", condition(nc, "Initialized"), condition(nc, "Ready"), res.RequeueAfter)
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil || node.Labels[karpv1.LabelNodeInitialized] != "true" {
		t.Errorf("node not labelled initialized: %v %v", node.Labels, err)
	}
}

// A registration whose status write conflicts, with nothing newer to read
// (a cache behind the API), requeues the claim without an error; the next
// pass records it, and the node is counted once.
func TestRegistrationCountedOnceAcrossAConflict(t *testing.T) {
	conflicts := 1
	e := newEnv(t, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		if nc, ok := obj.(*karpv1.NodeClaim); ok && conflicts > 0 && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
			conflicts--
			return apierrors.NewConflict(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), nc.Name, errors.New("changed meanwhile"))
		}
		return c.SubResource(sub).Patch(ctx, obj, p, opts...)
	}})
	e.create(t, "web-abc")
	res, err := e.controller.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "web-abc"}})
	if err != nil || res.RequeueAfter != fieldpatch.ConflictRequeue {
		t.Fatalf("the conflicting reconcile: requeue after %v, error %v; want a requeue after %v and no error", res.RequeueAfter, err, fieldpatch.ConflictRequeue)
	}
	nc, _ := e.reconcile(t, "web-abc")
	if condition(nc, "Registered") != "True/Registered" {
		t.Fatalf("after the retry: %s", condition(nc, "Registered"))
	}
	if n := counterSum(t, e.metrics, "karpenter_nodes_created_total"); n != 1 {
		t.Errorf("karpenter_nodes_created_total = %v, want 1", n)
	}
}

// counterSum adds up a counter family's series.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestInsufficientCapacityDeletesTheClaimAndRemembersTheOffering(t *testing.T) {
	e := newEnv(t)
	refused := cloudprovider.Offering{InstanceType: "small", Zone: "zone-a", CapacityType: "on-demand"}
	e.provider.RefuseOffering(refused)
	e.create(t, "web-ice")
	nc, _ := e.reconcile(t, "web-ice")
	if nc == nil || nc.DeletionTimestamp == nil {
		t.Fatalf("the claim was not deleted: %+v", nc)
	}
	if !e.unavailable.IsUnavailable("small", "zone-a", "on-demand") {
		t.Error("the refused offering is not remembered as unavailable")
	}
	e.wantDisrupted(t, "insufficient_capacity")
}

func TestLivenessDeletesClaimsThatNeverRegister(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.create(t, "web-lost")
	// Launched, but its node never registers.
	nc.Status.ProviderID = "kwok://ghost"
	nc.Status.Conditions = []metav1.Condition{{Type: "Launched", Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(epoch)}}
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(14 * time.Minute)
	nc, _ = e.reconcile(t, "web-lost")
	if nc.DeletionTimestamp != nil || condition(nc, "Registered") != "Unknown/NodeNotFound" {
		t.Fatalf("at 14 minutes: deleted %v, registered %s", nc.DeletionTimestamp != nil, condition(nc, "Registered"))
	}
	e.clock.Step(2 * time.Minute)
	if nc, _ = e.reconcile(t, "web-lost"); nc != nil && nc.DeletionTimestamp == nil {
		t.Errorf("not deleted 16 minutes after creation without a node")
	}
	e.wantDisrupted(t, "registration_timeout")
}

func TestDecisions(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(epoch)}}
	if why := Expired(nc, epoch.Add(4*time.Minute)); why != "" {
		t.Errorf("expired after 4 minutes unlaunched: %s", why)
	}
	if why := Expired(nc, epoch.Add(5*time.Minute)); why == "" {
		t.Error("not expired after 5 minutes unlaunched")
	}
	nc.Spec.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": *resourceOne()}
	node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if reason, _ := NotInitialized(nc, node); reason != "ResourceNotRegistered" {
		t.Errorf("a node without the requested GPU: %q", reason)
	}
	node.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resourceOne()}
	node.Spec.Taints = []corev1.Taint{{Key: "readiness.k8s.io/network", Effect: corev1.TaintEffectNoSchedule}}
	if reason, _ := NotInitialized(nc, node); reason != "KnownEphemeralTaintsExist" {
		t.Errorf("a node with a readiness taint: %q", reason)
	}
	node.Spec.Taints = nil
	if reason, _ := NotInitialized(nc, node); reason != "" {
		t.Errorf("a ready node: %q", reason)
	}
}

// wantDisrupted checks that exactly one NodeClaim of the default pool was
// counted as disrupted, for reason.
func (e env) wantDisrupted(t *testing.T, reason string) {
	t.Helper()
	want := fmt.Sprintf(`
# HELP karpenter_nodeclaims_disrupted_total Number of nodeclaims disrupted, by reason, nodepool, capacity type, the pool's consolidation policy and how the node is terminated.
# TYPE karpenter_nodeclaims_disrupted_total counter
karpenter_nodeclaims_disrupted_total{capacity_type="",consolidation_policy="",nodepool="default",reason=%q,termination_mode="forceful"} 1
`, reason)
	if err := testutil.GatherAndCompare(e.metrics, strings.NewReader(want), "karpenter_nodeclaims_disrupted_total"); err != nil {
		t.Error(err)
	}
}

// Registered stays registered when the node is missing for a while, and
// the node is counted once when it is seen again.
func TestRegisteredStaysRegistered(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.create(t, "web-abc")
	e.reconcile(t, "web-abc")
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-abc"}, node); err != nil {
		t.Fatal(err)
	}
	saved := node.DeepCopy()
	node.Finalizers = nil
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc, _ := e.reconcile(t, "web-abc")
	if condition(nc, "Registered") != "True/Registered" {
		t.Fatalf("with the node missing: Registered %s, want it kept", condition(nc, "Registered"))
	}
	saved.ResourceVersion = ""
	if err := e.kube.Create(ctx, saved); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, "web-abc")
	if n := counterSum(t, e.metrics, "karpenter_nodes_created_total"); n != 1 {
		t.Errorf("karpenter_nodes_created_total = %v, want 1", n)
	}
}
