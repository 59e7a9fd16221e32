//go:build integration

package kwok_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/kwok"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// The real kwok controller, configured by the control plane, plays the
// kubelet of the nodes the kwok provider launches and of no other: the node
// turns Ready (and loses the not-ready taint) with a held lease, 100 pods
// bound to it run, with their Ready condition and an IP, and go away once
// deleted.
func TestRealKWOKRunsProviderNodesAndTheirPods(t *testing.T) {
	c := realKWOK(t)
	ctx := context.Background()
	kube := realClient(t, c)
	if err := kube.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}

	// A node of another kubelet, which kwok must leave alone.
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-kwok", Labels: map[string]string{corev1.LabelHostname: "not-kwok"}}}
	if err := kube.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.Delete(ctx, other) }()

	provider := kwok.New(kube, roomyCatalog(t))
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "real-kwok-stages"}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"r-16x-amd64-linux"}},
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	launched, err := provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = provider.Delete(ctx, launched) }()

	var node corev1.Node
	eventually(ctx, t, time.Minute, "the kwok node Ready without the not-ready taint", func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKey{Name: nc.Name}, &node); err != nil {
			return false, err
		}
		return nodeReady(&node) && !hasTaint(&node, corev1.TaintNodeNotReady), nil
	})
	if node.Status.Phase != corev1.NodeRunning || node.Status.NodeInfo.Architecture != "amd64" {
		t.Errorf("node phase %q architecture %q: want Running on amd64", node.Status.Phase, node.Status.NodeInfo.Architecture)
	}
	if !hasTaint(&node, karpv1.TaintKeyUnregistered) {
		t.Errorf("kwok removed the unregistered taint, which is Nodewright's to lift: %v", node.Spec.Taints)
	}
	if node.Status.Allocatable.Pods().Value() != 200 {
		t.Errorf("allocatable pods %s: kwok must keep the provider's allocatable", node.Status.Allocatable.Pods())
	}
	var lease coordinationv1.Lease
	if err := kube.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: nc.Name}, &lease); err != nil {
		t.Fatalf("the node's lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.RenewTime == nil {
		t.Errorf("lease %+v: want held and renewed by kwok", lease.Spec)
	}

	// 100 pods bound to the node run: phase, Ready condition, an IP.
	const n = 100
	start := time.Now()
	for i := range n {
		if err := kube.Create(ctx, boundPod(fmt.Sprintf("real-kwok-%03d", i), nc.Name)); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	eventually(ctx, t, 2*time.Minute, "100 bound pods Running", func(ctx context.Context) (bool, error) {
		running, err := runningReady(ctx, kube)
		return running == n, err
	})
	t.Logf("real kwok: %d bound pods Running %v after the first was created (%v after the last)",
		n, time.Since(start).Round(10*time.Millisecond), time.Since(created).Round(10*time.Millisecond))

	// Deleted pods (with the default grace period) go away.
	if err := kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.MatchingLabels{"test": "real-kwok"}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, time.Minute, "deleted pods gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"test": "real-kwok"})
		return len(pods.Items) == 0, err
	})

	// By now kwok has had every chance to touch the other node: it did not.
	if err := kube.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if nodeReady(other) || other.Status.Phase == corev1.NodeRunning {
		t.Errorf("kwok played the kubelet of a node not annotated %s: %+v", controlplane.KWOKNodeSelector, other.Status)
	}

	if err := provider.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("Delete: %v", err)
	}
}

// boundPod is a pod already bound to node, tolerating its unregistered
// taint, labelled test=real-kwok.
func boundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"test": "real-kwok"}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Key: karpv1.TaintKeyUnregistered, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}},
		},
	}
}

// runningReady counts the test's pods that are Running, Ready, with an IP.
func runningReady(ctx context.Context, kube client.Client) (int, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"test": "real-kwok"}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && podReady(&p) && p.Status.PodIP != "" {
			n++
		}
	}
	return n, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
