//go:build integration

package aws_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// podsOn returns the Running pods of an app and their nodes.
func podsOn(ctx context.Context, kube client.Client, app string) (map[string]*corev1.Node, int, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return nil, 0, err
	}
	nodes := map[string]*corev1.Node{}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		running++
		if _, ok := nodes[p.Spec.NodeName]; !ok {
			n := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
				return nil, 0, err
			}
			nodes[p.Spec.NodeName] = n
		}
	}
	return nodes, running, nil
}

// The seed's EC2NodeClass and NodePools, and its web-api Deployment: the
// class resolves (subnets, security group, AL2023 AMIs, an instance
// profile for the role), and web-api's 6 pods run on on-demand amd64 m/r
// nodes of the stable pool, spread over the three zones.
func TestSeedWebAPILandsOnTheStablePool(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml", "nodepool-stable.yaml", "nodepool-gpu.yaml", "deployment-web-api.yaml")
	waitFor(ctx, t, time.Minute, "the EC2NodeClass Ready", func(ctx context.Context) (bool, error) {
		class := &awsv1.EC2NodeClass{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, "Ready"), nil
	})
	var nodes map[string]*corev1.Node
	waitFor(ctx, t, 3*time.Minute, "web-api's 6 pods running", func(ctx context.Context) (bool, error) {
		var running int
		var err error
		nodes, running, err = podsOn(ctx, c.kube, "web-api")
		return running == 6, err
	})
	zones := map[string]int{}
	for name, n := range nodes {
		l := n.Labels
		if l[karpv1.LabelNodePool] != "stable" || l[karpv1.LabelCapacityType] != "on-demand" || l[corev1.LabelArchStable] != "amd64" ||
			!slices.Contains([]string{"m", "r"}, l[awsv1.LabelInstanceCategory]) || l["node-type"] != "stable" {
			t.Errorf("node %s: pool %s, %s, %s, category %s, node-type %s; want stable, on-demand, amd64, m or r, stable", name,
				l[karpv1.LabelNodePool], l[karpv1.LabelCapacityType], l[corev1.LabelArchStable], l[awsv1.LabelInstanceCategory], l["node-type"])
		}
		zones[l[corev1.LabelTopologyZone]]++
	}
	if len(zones) != 3 {
		t.Errorf("web-api's nodes are in zones %v; the spread (maxSkew 1 over 6 pods) needs all three", zones)
	}
	for _, in := range c.fake.Instances() {
		if in.State != "running" {
			continue
		}
		if in.CapacityType != "on-demand" || in.Tags["karpenter.sh/nodepool"] != "stable" || in.Tags["kubernetes.io/cluster/demo"] != "owned" {
			t.Errorf("instance %s: %s, tags %v", in.ID, in.CapacityType, in.Tags)
		}
	}
}

// A pod of the default pool gets a spot node; when spot capacity runs out
// for what it allows, the next launch falls back to on-demand.
func TestDefaultPoolFallsBackFromSpotToOnDemand(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml")
	c.fake.InsufficientCapacity("*", "*", "spot", true)
	d := generalApp("batch", "m5", 1)
	if err := c.kube.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var nodes map[string]*corev1.Node
	waitFor(ctx, t, 3*time.Minute, "the pod running", func(ctx context.Context) (bool, error) {
		var running int
		var err error
		nodes, running, err = podsOn(ctx, c.kube, "batch")
		return running == 1, err
	})
	for name, n := range nodes {
		if n.Labels[karpv1.LabelCapacityType] != "on-demand" || n.Labels[awsv1.LabelInstanceFamily] != "m5" {
			t.Errorf("node %s: %s %s, want an on-demand m5 once spot has no capacity", name, n.Labels[karpv1.LabelCapacityType], n.Labels[corev1.LabelInstanceTypeStable])
		}
	}
	if c.fake.Requests("CreateFleet") < 2 {
		t.Errorf("CreateFleet called %d times: want the spot attempt, then on-demand", c.fake.Requests("CreateFleet"))
	}
	// Spot capacity is back: a new app's node is spot.
	c.fake.InsufficientCapacity("*", "*", "spot", false)
	if err := c.kube.Create(ctx, generalApp("batch2", "c5", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 3*time.Minute, "the second pod running on spot", func(ctx context.Context) (bool, error) {
		nodes, running, err := podsOn(ctx, c.kube, "batch2")
		for _, n := range nodes {
			if n.Labels[karpv1.LabelCapacityType] != "spot" {
				t.Errorf("node %s is %s, want spot", n.Name, n.Labels[karpv1.LabelCapacityType])
			}
		}
		return running == 1, err
	})
}

// GPU pods run only on the gpu pool's tainted g/p nodes of generation 5+.
func TestGPUPodsLandOnTheGPUPool(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml", "nodepool-gpu.yaml")
	d := generalApp("trainer", "", 1)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"node-type": "gpu"}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	if err := c.kube.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var nodes map[string]*corev1.Node
	waitFor(ctx, t, 3*time.Minute, "the GPU pod running", func(ctx context.Context) (bool, error) {
		var running int
		var err error
		nodes, running, err = podsOn(ctx, c.kube, "trainer")
		return running == 1, err
	})
	for name, n := range nodes {
		l := n.Labels
		gen := l[awsv1.LabelInstanceGeneration]
		if l[karpv1.LabelNodePool] != "gpu" || !slices.Contains([]string{"g", "p"}, l[awsv1.LabelInstanceCategory]) || gen <= "4" && len(gen) == 1 {
			t.Errorf("node %s: pool %s, %s: want a g/p instance of generation > 4 from the gpu pool", name, l[karpv1.LabelNodePool], l[corev1.LabelInstanceTypeStable])
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == "nvidia.com/gpu" && t.Effect == corev1.TaintEffectNoSchedule
		}) {
			t.Errorf("node %s has no nvidia.com/gpu taint: %v", name, n.Spec.Taints)
		}
	}
}

// generalApp is a Deployment of the default pool's pods (node-type
// general), on one instance family when family is set.
func generalApp(name, family string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	selector := map[string]string{"node-type": "general"}
	if family != "" {
		selector[awsv1.LabelInstanceFamily] = family
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			},
		},
	}
}
