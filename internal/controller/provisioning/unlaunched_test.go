package provisioning

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/kwok"
)

// twoZoneTypes: a catalog whose types span two zones and two capacity
// types, so that a claim can leave zone, instance type and capacity type
// open.
func twoZoneTypes(t *testing.T) []catalog.InstanceType {
	t.Helper()
	types, err := catalog.Parse("t", []byte(`[
	  {"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "8Gi", "pods": "20"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.1}, {"capacityType": "spot", "zone": "zone-a", "price": 0.05}]},
	  {"name": "large", "architecture": "amd64", "resources": {"cpu": "8", "memory": "32Gi", "pods": "60"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.4}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.4}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// requireNodes gives a pod one required node-affinity term.
func requireNodes(p *corev1.Pod, reqs ...corev1.NodeSelectorRequirement) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	return p
}

// restarted is a new model and provisioner over the same API, as after a
// restart: the NodeClaims and pods are read again, nothing is nominated.
func restarted(t *testing.T, e env, np *karpv1.NodePool, pods ...*corev1.Pod) *Provisioner {
	t.Helper()
	cluster := state.NewCluster(clocktesting.NewFakeClock(e.clock.Now().Add(time.Second)))
	cluster.MarkSynced()
	cluster.UpdateNodePool(np)
	list := &karpv1.NodeClaimList{}
	if err := e.kube.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		cluster.UpdateNodeClaim(&list.Items[i])
	}
	for _, p := range pods {
		cluster.UpdatePod(p)
	}
	return NewProvisioner(e.kube, e.provisioner.provider, cluster, record.NewFakeRecorder(100), e.provisioner.opts)
}

// A pod whose NodeClaim is created but not launched is not bought a
// second one after a restart, whatever node affinity it has: the claim
// leaves open keys the pod constrains (zone, instance type, capacity
// type), and the pod still fits it.
func TestARestartDoesNotBuyAnUnlaunchedClaimsPodAgain(t *testing.T) {
	cases := []struct {
		name string
		pod  func() *corev1.Pod
	}{
		{"no constraint", func() *corev1.Pod { return pendingPod("a", "1") }},
		{"zone In [zone-a, zone-b]", func() *corev1.Pod {
			return requireNodes(pendingPod("a", "1"), corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}})
		}},
		{"zone Exists", func() *corev1.Pod {
			return requireNodes(pendingPod("a", "1"), corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpExists})
		}},
		{"instance type In [small, large]", func() *corev1.Pod {
			return requireNodes(pendingPod("a", "1"), corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"small", "large"}})
		}},
		{"capacity type Exists", func() *corev1.Pod {
			return requireNodes(pendingPod("a", "1"), corev1.NodeSelectorRequirement{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpExists})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			np := kwokPool("web")
			e := newEnv(t, np)
			e.provisioner = NewProvisioner(e.kube, kwok.New(e.kube, twoZoneTypes(t)), e.cluster, e.recorder, Options{NominationTTL: 20 * time.Second})
			pod := tc.pod()
			e.cluster.UpdatePod(pod)
			if created, err := e.provisioner.Provision(ctx); err != nil || len(created) != 1 {
				t.Fatalf("first round: %d NodeClaims, %v", len(created), err)
			}
			again, err := restarted(t, e, np, pod).Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != 0 {
				t.Errorf("after a restart the pod was bought %d more NodeClaims", len(again))
			}
		})
	}
}

// Without a restart: a launch slower than the nomination TTL does not get
// its pod bought again each time the nomination lapses.
func TestASlowLaunchDoesNotBuyItsPodAgain(t *testing.T) {
	ctx := context.Background()
	np := kwokPool("web")
	e := newEnv(t, np)
	e.provisioner = NewProvisioner(e.kube, kwok.New(e.kube, twoZoneTypes(t)), e.cluster, e.recorder, Options{NominationTTL: 20 * time.Second})
	pod := requireNodes(pendingPod("a", "1"), corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}})
	e.cluster.UpdatePod(pod)
	if created, err := e.provisioner.Provision(ctx); err != nil || len(created) != 1 {
		t.Fatalf("first round: %d NodeClaims, %v", len(created), err)
	}
	extra := 0
	for range 5 {
		e.clock.Step(30 * time.Second)
		again, err := e.provisioner.Provision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		extra += len(again)
	}
	if extra != 0 {
		t.Errorf("a launch stuck for 2.5 minutes: the one pod was bought %d more NodeClaims", extra)
	}
}

// Replicas spread or kept apart by hostname or zone: after a restart their
// unlaunched claims take them again, nothing more is bought.
func TestARestartDoesNotBuySpreadReplicasAgain(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
	}{
		{"spread by hostname", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		}},
		{"anti-affinity by hostname", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}}
		}},
		{"spread by zone", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			np := kwokPool("web")
			e := newEnv(t, np)
			e.provisioner = NewProvisioner(e.kube, kwok.New(e.kube, twoZoneTypes(t)), e.cluster, e.recorder, Options{NominationTTL: 20 * time.Second})
			var pods []*corev1.Pod
			for _, n := range []string{"a", "b"} {
				p := pendingPod(n, "1")
				p.Labels = map[string]string{"app": "web"}
				tc.mutate(p)
				pods = append(pods, p)
				e.cluster.UpdatePod(p)
			}
			created, err := e.provisioner.Provision(ctx)
			if err != nil || len(created) == 0 {
				t.Fatalf("first round: %d NodeClaims, %v", len(created), err)
			}
			again, err := restarted(t, e, np, pods...).Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != 0 {
				t.Errorf("the first round bought %d NodeClaims, after a restart %d more", len(created), len(again))
			}
		})
	}
}

// Two pods that need different zones do not share one unlaunched claim
// that leaves the zone open: one claim launches in one zone only.
func TestPodsWithDisjointZonesDoNotShareAnUnlaunchedClaim(t *testing.T) {
	ctx := context.Background()
	np := kwokPool("web")
	e := newEnv(t, np)
	e.provisioner = NewProvisioner(e.kube, kwok.New(e.kube, twoZoneTypes(t)), e.cluster, e.recorder, Options{NominationTTL: 20 * time.Second})
	// After a restart: a claim sized for 2 CPUs of pods, zone left open.
	open := unlaunched(t, np, "web-open", []string{"large"}, "2")
	open.Spec.Requirements = append(open.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}})
	e.cluster.UpdateNodeClaim(open)
	inZone := func(name, zone string) *corev1.Pod {
		return requireNodes(pendingPod(name, "1"), corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	}
	e.cluster.UpdatePod(inZone("in-a", "zone-a"))
	e.cluster.UpdatePod(inZone("in-b", "zone-b"))
	created, err := e.provisioner.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, b := e.cluster.NominationOf("default", "in-a"), e.cluster.NominationOf("default", "in-b")
	if a == open.Name && b == open.Name {
		t.Fatalf("both pods were planned onto %s, which can launch in one zone only", open.Name)
	}
	if (a == open.Name) == (b == open.Name) || len(created) != 1 {
		t.Errorf("nominated in-a to %q, in-b to %q, bought %d NodeClaims: want one pod on %s and one new claim", a, b, len(created), open.Name)
	}
}

// An unlaunched claim's room is its requests, which include the DaemonSet
// pods that will run on it: no other pod is planned into their share.
func TestAnUnlaunchedClaimKeepsItsDaemonSetPodsShare(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("web"))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"}}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}}}}
	e.cluster.UpdateDaemonSet(ds)
	e.cluster.UpdatePod(pendingPod("a", "1"))
	created, err := e.provisioner.Provision(ctx)
	if err != nil || len(created) != 1 {
		t.Fatalf("first round: %d NodeClaims, %v", len(created), err)
	}
	e.cluster.UpdatePod(pendingPod("b", "900m"))
	again, err := e.provisioner.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 {
		t.Errorf("pod b was planned onto %q, into the room its DaemonSet pod needs (claim sized %v)", e.cluster.NominationOf("default", "b"), created[0].Spec.Resources.Requests)
	}
}

// A claim whose launch may have succeeded (the answer lost) and that is
// now being deleted still holds its instance until termination is done:
// the pool's limit counts it, though no pod is planned onto it.
func TestLimitsCountADeletingUnlaunchedClaim(t *testing.T) {
	ctx := context.Background()
	capped := kwokPool("capped", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	})
	e := newEnv(t, capped)
	nc := unlaunched(t, capped, "capped-going", []string{"large"}, "1")
	now := metav1.Now()
	nc.DeletionTimestamp = &now
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	e.cluster.UpdateNodeClaim(nc)
	e.cluster.UpdatePod(pendingPod("b", "1500m"))
	e.cluster.UpdatePod(pendingPod("c", "1500m"))
	created, err := e.provisioner.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	worst := int64(8) // the deleting claim's only option, large
	for _, c := range created {
		worst += largestCPU(c)
	}
	if worst > 10 {
		t.Errorf("worst case %d CPUs in a pool limited to 10 (%d new claims)", worst, len(created))
	}
	for _, p := range []string{"b", "c"} {
		if got := e.cluster.NominationOf("default", p); got == nc.Name {
			t.Errorf("pod %s was planned onto the deleting claim %s", p, nc.Name)
		}
	}
}
