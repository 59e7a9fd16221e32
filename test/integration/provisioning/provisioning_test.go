//go:build integration

// Package provisioning_test runs Nodewright's controllers against a real
// control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) with the kwok provider: pods go Pending, NodeClaims are
// created, nodes register, and kube-scheduler binds every pod.
package provisioning_test

import (
	"context"
	"fmt"
	"github.com/go-logr/logr/testr"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{ControllerManager: true, Scheduler: true}, &cp))
}

// testCatalog: three general types, on-demand and spot in three zones.
func testCatalog(t *testing.T) []catalog.InstanceType {
	t.Helper()
	var entries string
	for i, size := range []int{2, 4, 8} {
		if i > 0 {
			entries += ","
		}
		price := 0.05 * float64(size)
		entries += fmt.Sprintf(`{"name": "c-%dx-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
		  "resources": {"cpu": "%d", "memory": "%dGi", "pods": "110"}, "offerings": [
		  {"capacityType": "on-demand", "zone": "zone-a", "price": %g}, {"capacityType": "on-demand", "zone": "zone-b", "price": %g},
		  {"capacityType": "on-demand", "zone": "zone-c", "price": %g}, {"capacityType": "spot", "zone": "zone-a", "price": %g},
		  {"capacityType": "spot", "zone": "zone-b", "price": %g}, {"capacityType": "spot", "zone": "zone-c", "price": %g}]}`,
			size, size, 4*size, price, price, price, price*0.7, price*0.7, price*0.7)
	}
	types, err := catalog.Parse("test", []byte("["+entries+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func nodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": "web"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	return np
}

// deployment: replicas pods requesting cpu, selecting node-type=web, spread
// over zones with the other deployments (one app label).
func deployment(name, cpu string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web", "tier": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"node-type": "web"},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": name}},
					}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
				},
			},
		},
	}
}

// startControllers runs Nodewright's controllers against the control plane
// until the test ends, and returns an admin client.
func startControllers(t *testing.T, types []catalog.InstanceType, refused ...cloudprovider.Offering) client.Client {
	t.Helper()
	return startControllersWith(t, func(c *operator.Config) {
		c.InstanceTypes, c.KWOKRefusedOfferings = types, refused
	})
}

// startControllersWith runs the controllers with the test defaults, as
// changed by configure.
func startControllersWith(t *testing.T, configure func(*operator.Config)) client.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	conf := operator.Config{
		CloudProvider: "kwok", KWOKKubelet: true, RegistrationDelay: time.Second,
		BatchIdle: 2 * time.Second, BatchMax: 10 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
		MetricsAddr: "0", HealthAddr: "0", Logger: logr.Discard(), Embedded: true,
	}
	if os.Getenv("NODEWRIGHT_TEST_LOG") != "" {
		conf.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	}
	configure(&conf)
	go func() { done <- operator.Run(ctx, cp.Config, conf) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
	return kube
}

// ensureNodeClass creates the KWOKNodeClass once.
func ensureNodeClass(ctx context.Context, t *testing.T, kube client.Client) {
	t.Helper()
	if err := kube.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func TestPendingPodsGetNodesAndRun(t *testing.T) {
	ctx := context.Background()
	types := testCatalog(t)
	kube := startControllers(t, types)
	ensureNodeClass(ctx, t, kube)
	if err := kube.Create(ctx, nodePool()); err != nil {
		t.Fatal(err)
	}
	deployments := []*appsv1.Deployment{deployment("small", "250m", 10), deployment("medium", "1", 10), deployment("large", "2", 10)}
	for _, d := range deployments {
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	// Every pod runs on a Nodewright node.
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 30, nil
	})
	if err != nil {
		t.Fatalf("not all 30 pods are running: %v", summarize(pods))
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: "web"}); err != nil {
		t.Fatal(err)
	}
	nodeZone := map[string]string{}
	for _, n := range nodes.Items {
		if n.Labels[karpv1.LabelNodePool] != "web" || n.Labels["node-type"] != "web" || n.Labels[karpv1.LabelNodeInitialized] != "true" {
			t.Errorf("node %s: labels %v", n.Name, n.Labels)
		}
		nodeZone[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	perZone := map[string]map[string]int{}
	for _, p := range pods.Items {
		tier := p.Labels["tier"]
		if perZone[tier] == nil {
			perZone[tier] = map[string]int{}
		}
		perZone[tier][nodeZone[p.Spec.NodeName]]++
	}
	for tier, zones := range perZone {
		lo, hi := 100, 0
		for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
			lo, hi = min(lo, zones[z]), max(hi, zones[z])
		}
		if hi-lo > 1 {
			t.Errorf("tier %s spreads %v over zones, skew above 1", tier, zones)
		}
	}

	// One decision buys exactly the nodes the solver plans for these pods.
	// kube-scheduler then binds pods one at a time as nodes turn Ready, by
	// its own scoring, and under a DoNotSchedule zone spread it may pack
	// them differently from the plan; a pod it then finds no room for
	// needs one more node. So: the first wave equals the plan, and any
	// later NodeClaim answers a pod kube-scheduler rejected with the
	// planned nodes up. Never more.
	want := plannedNodes(t, deployments, types)
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "web"}); err != nil {
		t.Fatal(err)
	}
	first := claims.Items[0].CreationTimestamp.Time
	for _, c := range claims.Items {
		if c.CreationTimestamp.Time.Before(first) {
			first = c.CreationTimestamp.Time
		}
	}
	firstWave := 0
	for _, c := range claims.Items {
		if !c.CreationTimestamp.Time.After(first.Add(time.Second)) {
			firstWave++
		}
	}
	rejected := rejectedWithNodes(ctx, t, kube, want)
	t.Logf("%d pods running on %d nodes (%d NodeClaims, %d in the first wave; the plan has %d; kube-scheduler rejected %d pods with the planned nodes up); per tier and zone %v",
		len(pods.Items), len(nodes.Items), len(claims.Items), firstWave, want, len(rejected), perZone)
	offPlan := offPlan(ctx, t, kube, pods, claims)
	t.Logf("%d pods bound off their planned node: %v", len(offPlan), offPlan)
	if firstWave != want {
		t.Errorf("the first decision bought %d NodeClaims, want the %d the solver plans for these pods", firstWave, want)
	}
	if extra := len(claims.Items) - firstWave; extra > len(rejected) {
		t.Errorf("%d NodeClaims after the first wave, but kube-scheduler found no room for only %d pods (%v): over-provisioned", extra, len(rejected), rejected)
	}
	if len(nodes.Items) != len(claims.Items) {
		t.Errorf("%d nodes for %d NodeClaims", len(nodes.Items), len(claims.Items))
	}
}

// offPlan lists the pods kube-scheduler bound to another node than the one
// their Nominated event named, as pod: planned -> actual NodeClaim.
func offPlan(ctx context.Context, t *testing.T, kube client.Client, pods corev1.PodList, claims karpv1.NodeClaimList) []string {
	t.Helper()
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	planned := map[string]string{}
	for _, e := range events.Items {
		if e.Reason == "Nominated" && e.Source.Component == "karpenter" {
			planned[e.InvolvedObject.Name] = strings.TrimPrefix(e.Message, "Pod should schedule on: nodeclaim/")
		}
	}
	claimOf := map[string]string{}
	for _, c := range claims.Items {
		claimOf[c.Status.NodeName] = c.Name
	}
	var out []string
	for _, p := range pods.Items {
		if got := claimOf[p.Spec.NodeName]; got != planned[p.Name] {
			out = append(out, fmt.Sprintf("%s: %s -> %s", p.Name, planned[p.Name], got))
		}
	}
	return out
}

// rejectedWithNodes names the pods kube-scheduler reported unschedulable
// while at least n nodes existed ("0/N nodes are available", N >= n).
func rejectedWithNodes(ctx context.Context, t *testing.T, kube client.Client, n int) []string {
	t.Helper()
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range events.Items {
		var available, total int
		if e.Reason != "FailedScheduling" || e.Source.Component == "karpenter" {
			continue
		}
		if _, err := fmt.Sscanf(e.Message, "%d/%d nodes are available", &available, &total); err != nil || total < n || seen[e.InvolvedObject.Name] {
			continue
		}
		seen[e.InvolvedObject.Name] = true
		out = append(out, e.InvolvedObject.Name)
	}
	return out
}

func plannedNodes(t *testing.T, deployments []*appsv1.Deployment, types []catalog.InstanceType) int {
	t.Helper()
	var pods []*corev1.Pod
	for _, d := range deployments {
		for i := range *d.Spec.Replicas {
			p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
			p.Name, p.Namespace = fmt.Sprintf("%s-%d", d.Name, i), "default"
			pods = append(pods, p)
		}
	}
	its := make([]*catalog.InstanceType, len(types))
	for i := range types {
		its[i] = &types[i]
	}
	plan := sched.Solve(sched.Input{Pods: pods, NodePools: []sched.NodePool{{NodePool: nodePool(), InstanceTypes: its}}})
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("the plan leaves pods unschedulable: %+v", plan.Unschedulable)
	}
	return len(plan.NodeClaims)
}

func summarize(pods corev1.PodList) map[string]int {
	out := map[string]int{}
	for _, p := range pods.Items {
		out[string(p.Status.Phase)+"/"+p.Spec.NodeName]++
	}
	return out
}

// A NodePool whose NodeClass does not exist is not Ready and launches
// nothing; its pods stay pending with a reason.
func TestNodePoolWithMissingNodeClassProvisionsNothing(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t))
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": "orphan"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "does-not-exist"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
			return false, err
		}
		for _, c := range np.Status.Conditions {
			if c.Type == "Ready" && c.Status == metav1.ConditionFalse && c.Reason == "NodeClassNotFound" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the NodePool never became not Ready for its missing NodeClass: %+v", np.Status.Conditions)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stranded", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"node-type": "orphan"},
		Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
	}}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second) // several batch windows
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "orphan"}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Errorf("%d NodeClaims from a NodePool whose NodeClass is missing", len(claims.Items))
	}
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || (e.InvolvedObject.Name == "stranded" && e.Reason == "FailedScheduling" && e.Source.Component == "karpenter")
	}
	if !found {
		t.Error("no FailedScheduling event from Nodewright on the stranded pod")
	}
}
