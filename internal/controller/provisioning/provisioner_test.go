package provisioning

import (
	"context"
	"strings"
	"testing"
	"time"

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
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/kwok"
)

type env struct {
	kube        client.Client
	cluster     *state.Cluster
	clock       *clocktesting.FakeClock
	recorder    *record.FakeRecorder
	provisioner *Provisioner
}

func newEnv(t *testing.T, pools ...*karpv1.NodePool) env {
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
	return env{kube: kube, cluster: cluster, clock: clk, recorder: rec,
		provisioner: NewProvisioner(kube, kwok.New(kube, types), cluster, rec, Options{NominationTTL: 20 * time.Second})}
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
	if cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "1500m" {
		t.Errorf("requests %v, want the two pods' 1500m", nc.Spec.Resources.Requests)
	}
	got := events(e.recorder)
	if len(got) != 2 || !strings.Contains(got[0], "Normal Nominated Pod should schedule on: nodeclaim/web-") {
		t.Errorf("events %v", got)
	}

	// The pods are nominated: a second batch buys nothing for them...
	if created, err := e.provisioner.Provision(ctx); err != nil || len(created) != 0 {
		t.Errorf("second batch created %d NodeClaims: %v", len(created), err)
	}
	// ...until the nomination expires without kube-scheduler binding them.
	e.clock.Step(21 * time.Second)
	if created, _ := e.provisioner.Provision(ctx); len(created) != 1 {
		t.Errorf("after the nomination expired, %d NodeClaims", len(created))
	}
}

func TestLimitsHoldAcrossBatches(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("capped", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	}))
	e.cluster.UpdatePod(pendingPod("a", "1500m"))
	if created, _ := e.provisioner.Provision(ctx); len(created) != 1 {
		t.Fatalf("first batch: %d", len(created))
	}
	// The first claim is not launched: it counts as its largest option (8
	// CPUs of "large"), leaving 2 CPUs: a 1.5 CPU pod fits "small", a second
	// does not.
	e.cluster.UpdatePod(pendingPod("b", "1500m"))
	e.cluster.UpdatePod(pendingPod("c", "1500m"))
	created, _ := e.provisioner.Provision(ctx)
	if len(created) != 1 {
		t.Errorf("second batch created %d NodeClaims, want 1", len(created))
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
