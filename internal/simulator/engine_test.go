package simulator

import (
	"context"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/plan"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

const basicManifests = `
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: nginx
          resources: {requests: {cpu: "1", memory: 1Gi}}
`

func defaultCatalog(t testing.TB) []catalog.InstanceType {
	t.Helper()
	types, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	return types
}

const mixedDeployments = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: small}
spec:
  replicas: 17
  selector: {matchLabels: {app: small}}
  template:
    metadata: {labels: {app: small}}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: small}}}
      containers: [{name: app, image: nginx, resources: {requests: {cpu: 250m, memory: 512Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: large}
spec:
  replicas: 9
  selector: {matchLabels: {app: large}}
  template:
    metadata: {labels: {app: large}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: "3", memory: 8Gi}}}]
`

// Pending pods get the nodes the solver plans for them, in one wave, and
// every pod binds.
func TestDeploymentGetsNodesAndEveryPodBinds(t *testing.T) {
	set := &manifest.Set{}
	if err := set.Add("basic.yaml", []byte(basicManifests)); err != nil {
		t.Fatal(err)
	}
	if err := set.Add("mixed.yaml", []byte(mixedDeployments)); err != nil {
		t.Fatal(err)
	}
	types := defaultCatalog(t)
	in, _ := plan.Input(set, types)
	want := sched.Solve(in)
	rep := mustSimulate(t, &Input{Initial: set}, Options{InstanceTypes: types, Duration: 10 * time.Minute, Seed: 1})
	if rep.Summary.PodsBound != 36 || rep.Summary.PodsPendingAtEnd != 0 {
		t.Errorf("%d pods bound, %d pending: want all 36 bound", rep.Summary.PodsBound, rep.Summary.PodsPendingAtEnd)
	}
	if rep.Summary.NodeClaimsLaunched != len(want.NodeClaims) {
		t.Errorf("%d NodeClaims launched, want the %d the solver plans ($%.4f/h)", rep.Summary.NodeClaimsLaunched, len(want.NodeClaims), want.TotalPrice())
	}
	if got := rep.Summary.CostPerHourFinal; math.Abs(got-want.TotalPrice()) > 1e-6 {
		t.Errorf("$%.4f/h at the end, want the plan's $%.4f/h", got, want.TotalPrice())
	}
	for _, e := range rep.Errors {
		t.Errorf("controller error: %s", e)
	}
}

// The simulator looks again just after a nomination lapses, as the live
// loop does: the pod whose planned place never came is decided for in the
// next window, not at the next resync.
func TestSimulatorLooksAgainWhenANominationLapses(t *testing.T) {
	e, err := New(Options{InstanceTypes: defaultCatalog(t), Duration: 30 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "no nodes"}}}}
	ctx := context.Background()
	e.At(3500*time.Millisecond, func() error {
		// Planned onto a claim that never comes; lapses at 11.5 s.
		e.components.Cluster.Nominate([]*corev1.Pod{pod}, "ghost", 8*time.Second)
		return e.Client().Create(ctx, pod.DeepCopy())
	})
	var provisionable, open bool
	e.At(12*time.Second, func() error {
		provisionable = e.components.Cluster.AnyProvisionable()
		_, open = e.components.Batcher.CloseAt()
		return nil
	})
	if _, err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !provisionable {
		t.Fatal("the pod is not provisionable 0.5 s after its nomination lapsed")
	}
	if !open {
		t.Error("0.5 s after the nomination lapsed no provisioning window is open; the next resync is at 20 s")
	}
}

// A gated pod is not attempted (kube-scheduler says SchedulingGated) and
// gets no node; once its gates are removed it is attempted, provisioned
// for and bound.
func TestGatedPodIsScheduledOnceUngated(t *testing.T) {
	set := &manifest.Set{}
	if err := set.Add("basic.yaml", []byte(basicManifests)); err != nil {
		t.Fatal(err)
	}
	set.Deployments, set.Pods = nil, nil
	e, err := New(Options{InstanceTypes: defaultCatalog(t), Duration: 20 * time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Load(ctx, &Input{Initial: set}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated", Namespace: "default"},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/wait"}},
			Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	e.At(time.Second, func() error { return e.Client().Create(ctx, pod.DeepCopy()) })
	var gatedFor time.Duration
	e.At(5*time.Minute, func() error {
		live := &corev1.Pod{}
		if err := e.Client().Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, live); err != nil {
			return err
		}
		if live.Spec.NodeName != "" {
			t.Errorf("the gated pod was bound to %s", live.Spec.NodeName)
		}
		gatedFor = 5 * time.Minute
		live.Spec.SchedulingGates = nil
		return e.Client().Update(ctx, live)
	})
	rep, err := e.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gatedFor == 0 {
		t.Fatal("the ungating step did not run")
	}
	if rep.Summary.PodsBound != 1 || rep.Summary.PodsPendingAtEnd != 0 {
		t.Errorf("%d pods bound, %d pending at the end: want the ungated pod bound", rep.Summary.PodsBound, rep.Summary.PodsPendingAtEnd)
	}
}
