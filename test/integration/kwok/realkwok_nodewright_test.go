//go:build integration

package kwok_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/providers/kwok"
)

// Nodewright with its emulated kubelet off, the real kwok playing the
// kubelet instead (as users of Karpenter's kwok provider run it): a
// Deployment's pending pods get nodes Nodewright launches, which register
// and initialize, and run there; scaled to zero, the empty nodes go.
func TestNodewrightLaunchesAndRemovesNodesUnderRealKWOK(t *testing.T) {
	c := realKWOK(t)
	ctx := context.Background()
	kube := realClient(t, c)
	startNodewright(t, c.Config, func(conf *operator.Config) { conf.InstanceTypes = roomyCatalog(t) })
	if err := kube.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}

	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "real-kwok"}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": "real-kwok"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"r-4x-amd64-linux"}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.Delete(ctx, np) }()

	// Ten pods of 1.5 CPU: two fit a 4-CPU node, so several nodes.
	replicas := int32(10)
	labels := map[string]string{"app": "real-kwok"}
	grace := int64(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "real-kwok", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"node-type": "real-kwok"},
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}},
			}}},
	}
	if err := kube.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.Delete(ctx, dep) }()

	var pods corev1.PodList
	eventually(ctx, t, 2*time.Minute, "the Deployment's pods Running and Ready", func(ctx context.Context) (bool, error) {
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				ready++
			}
		}
		return ready == int(replicas), nil
	})
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		var node corev1.Node
		if err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(node.Spec.ProviderID, kwok.ProviderIDPrefix) || node.Labels[karpv1.LabelNodePool] != np.Name {
			t.Errorf("pod %s runs on node %s (provider ID %q, labels %v): want a node Nodewright launched for %s",
				p.Name, node.Name, node.Spec.ProviderID, node.Labels, np.Name)
		}
		if hasTaint(&node, karpv1.TaintKeyUnregistered) || hasTaint(&node, corev1.TaintNodeNotReady) {
			t.Errorf("node %s still has a startup taint: %v", node.Name, node.Spec.Taints)
		}
		nodes[node.Name] = true
	}
	if len(nodes) < 5 {
		t.Errorf("%d pods of 1.5 CPU on %d 4-CPU nodes: want at least 5", replicas, len(nodes))
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			t.Errorf("nodeclaim %s not Initialized: %+v", nc.Name, nc.Status.Conditions)
		}
	}

	// Scaled to zero, the nodes are empty; consolidation removes them.
	if err := kube.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	dep.Spec.Replicas = &zero
	if err := kube.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 2*time.Minute, "the empty nodes removed", func(ctx context.Context) (bool, error) {
		var left karpv1.NodeClaimList
		if err := kube.List(ctx, &left, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
			return false, err
		}
		var nodes corev1.NodeList
		if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
			return false, err
		}
		return len(left.Items) == 0 && len(nodes.Items) == 0, nil
	})
}

// startNodewright runs Nodewright's controllers, kwok provider, emulated
// kubelet off, against the API server of restConfig until the test ends.
func startNodewright(t *testing.T, restConfig *rest.Config, configure func(*operator.Config)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conf := operator.Config{
		CloudProvider: "kwok", KWOKKubelet: false,
		BatchIdle: time.Second, BatchMax: 5 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
		MetricsAddr: "0", HealthAddr: "0", Logger: logr.Discard(), Embedded: true,
	}
	if os.Getenv("NODEWRIGHT_TEST_LOG") != "" {
		conf.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	}
	configure(&conf)
	done := make(chan error, 1)
	go func() { done <- operator.Run(ctx, restConfig, conf) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})
}
