package provisioning

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
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/controller/nodepool"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/kwok"
)

type env struct {
	kube        client.Client
	cluster     *state.Cluster
	clock       *clocktesting.FakeClock
	recorder    *record.FakeRecorder
	metrics     *prometheus.Registry
	provisioner *Provisioner
}

// newEnv is a provisioner on a cluster model that has synced.
func newEnv(t *testing.T, pools ...*karpv1.NodePool) env {
	t.Helper()
	e := newUnsyncedEnv(t, pools...)
	e.cluster.MarkSynced()
	return e
}

// newUnsyncedEnv is a provisioner on a cluster model whose feed has not
// said it is complete (a controller just started).
func newUnsyncedEnv(t *testing.T, pools ...*karpv1.NodePool) env {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(&kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}).Build()
	types, err := catalog.Parse("t", []byte(`[
	  {"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "8Gi", "pods": "20"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]},
	  {"name": "large", "architecture": "amd64", "resources": {"cpu": "8", "memory": "32Gi", "pods": "60"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.4}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	cluster := state.NewCluster(clk)
	for _, np := range pools {
		cluster.UpdateNodePool(np)
	}
	rec := record.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return env{kube: kube, cluster: cluster, clock: clk, recorder: rec, metrics: reg,
		provisioner: NewProvisioner(kube, kwok.New(kube, types), cluster, rec, Options{NominationTTL: 20 * time.Second, Metrics: m})}
}

func kwokPool(name string, mutate ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "web"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	np.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	for _, m := range mutate {
		m(np)
	}
	return np
}

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("default/" + name)},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestProvisionCreatesNodeClaimsAsKarpenterDoes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("web"))
	e.cluster.UpdatePod(pendingPod("a", "1"))
	e.cluster.UpdatePod(pendingPod("b", "500m"))

	created, err := e.provisioner.Provision(ctx)
	if err != nil || len(created) != 1 {
		t.Fatalf("created %d NodeClaims, err %v", len(created), err)
	}
	list := &karpv1.NodeClaimList{}
	if err := e.kube.List(ctx, list); err != nil || len(list.Items) != 1 {
		t.Fatalf("NodeClaims in the API: %d, %v", len(list.Items), err)
	}
	nc := list.Items[0]
	if !strings.HasPrefix(nc.Name, "web-") || nc.Labels[karpv1.LabelNodePool] != "web" || nc.Labels["team"] != "web" || nc.Labels["karpenter.kwok.sh/kwoknodeclass"] != "default" {
		t.Errorf("name %q labels %v", nc.Name, nc.Labels)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Kind != "NodePool" || nc.OwnerReferences[0].UID != "uid-web" || !*nc.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owner %+v", nc.OwnerReferences)
	}
	if len(nc.Spec.Taints) != 1 || nc.Spec.NodeClassRef.Name != "default" || nc.Spec.ExpireAfter.String() != "720h0m0s" {
		t.Errorf("spec %+v", nc.Spec)
	}
	if hash, _ := nodepool.Hash(kwokPool("web")); nc.Annotations[karpv1.AnnotationNodePoolHash] != hash || nc.Annotations[karpv1.AnnotationNodePoolHashVersion] != nodepool.HashVersion {
		t.Errorf("annotations %v, want the pool's template hash %s (%s)", nc.Annotations, hash, nodepool.HashVersion)
	}
	if cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "1500m" {
		t.Errorf("requests %v, want the two pods' 1500m", nc.Spec.Resources.Requests)
	}
	got := events(e.recorder)
	if len(got) != 2 || !strings.Contains(got[0], "Normal Nominated Pod should schedule on: nodeclaim/web-") {
		t.Errorf("events %v", got)
	}
	want := `
# HELP karpenter_nodeclaims_created_total Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.
# TYPE karpenter_nodeclaims_created_total counter
karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="web",reason="provisioned"} 1
`
	if err := testutil.GatherAndCompare(e.metrics, strings.NewReader(want), "karpenter_nodeclaims_created_total"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(e.metrics, "karpenter_scheduler_scheduling_duration_seconds"); n != 1 {
		t.Errorf("scheduling duration series: %d, want 1", n)
	}

	// The pods are nominated: a second batch buys nothing for them...
	if created, err := e.provisioner.Provision(ctx); err != nil || len(created) != 0 {
		t.Errorf("second batch created %d NodeClaims: %v", len(created), err)
	}
	// The nomination expires, but the claim has no provider ID yet: it is
	// capacity on its way, and the pods go back onto it.
	e.clock.Step(21 * time.Second)
	events(e.recorder)
	if created, _ := e.provisioner.Provision(ctx); len(created) != 0 {
		t.Errorf("while the claim launches, %d NodeClaims were created", len(created))
	}
	if got := events(e.recorder); len(got) != 2 || !strings.Contains(got[0], "Pod should schedule on: node/"+nc.Name) {
		t.Errorf("events while the claim launches %v, want both pods nominated to %s again", got, nc.Name)
	}
	e.clock.Step(21 * time.Second)
	// Launched, it is in-flight capacity: the pods are nominated to it
	// rather than buying a second node.
	launch(e, &nc, "2")
	events(e.recorder)
	if created, _ := e.provisioner.Provision(ctx); len(created) != 0 {
		t.Errorf("after launch, %d more NodeClaims", len(created))
	}
	// The same nomination as 21 s ago: planned, not told again.
	if got := events(e.recorder); len(got) != 0 {
		t.Errorf("events after launch %v, want none: the pods were told the same %s ago", got, 21*time.Second)
	}
	for _, pod := range []string{"a", "b"} {
		if got := e.cluster.NominationOf("default", pod); got != nc.Name {
			t.Errorf("after launch, pod %s is nominated to %q, want %s", pod, got, nc.Name)
		}
	}
}

// launch records a claim as launched with cpu allocatable, as the
// lifecycle controller does.
func launch(e env, nc *karpv1.NodeClaim, cpu string) {
	nc = nc.DeepCopy()
	nc.Status.ProviderID = kwok.ProviderIDPrefix + nc.Name
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("20")}
	nc.Status.Allocatable = nc.Status.Capacity
	e.cluster.UpdateNodeClaim(nc)
}

func TestLimitsHoldAcrossBatches(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("capped", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	}))
	e.cluster.UpdatePod(pendingPod("a", "1500m"))
	created, _ := e.provisioner.Provision(ctx)
	if len(created) != 1 {
		t.Fatalf("first batch: %d", len(created))
	}
	// The first claim, still launching, counts as its largest option (the
	// small type: the large one would break the limit), which leaves 2 of
	// the 4 CPUs: b gets one more small node, c would exceed the limit.
	e.cluster.UpdatePod(pendingPod("b", "1500m"))
	e.cluster.UpdatePod(pendingPod("c", "1500m"))
	events(e.recorder)
	second, _ := e.provisioner.Provision(ctx)
	if len(second) != 1 {
		t.Fatalf("second batch created %d NodeClaims, want 1", len(second))
	}
	for _, r := range second[0].Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && (len(r.Values) != 1 || r.Values[0] != "small") {
			t.Errorf("instance-type options %v: the large one would break the limit", r.Values)
		}
	}
	var failed []string
	for _, ev := range events(e.recorder) {
		if strings.Contains(ev, ReasonFailedScheduling) {
			failed = append(failed, ev)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "limits exceeded") {
		t.Errorf("FailedScheduling events %v", failed)
	}
}

func TestPoolsThatCannotProvision(t *testing.T) {
	ctx := context.Background()
	notReady := kwokPool("broken", func(np *karpv1.NodePool) {
		np.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NodeClassNotFound", LastTransitionTime: metav1.Now()}}
	})
	foreign := kwokPool("aws", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	})
	e := newEnv(t, notReady, foreign)
	e.cluster.UpdatePod(pendingPod("a", "1"))
	if created, _ := e.provisioner.Provision(ctx); len(created) != 0 {
		t.Errorf("created %d NodeClaims from a not-Ready pool and a pool of another provider", len(created))
	}
	if ev := events(e.recorder); len(ev) != 1 || !strings.Contains(ev[0], "Warning FailedScheduling") || !strings.Contains(ev[0], "no NodePool can launch nodes") {
		t.Errorf("events %v", ev)
	}
}
