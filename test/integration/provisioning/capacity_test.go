//go:build integration

package provisioning_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// zonalPool: a pool of the given types, on-demand, nodes labelled node-type=name.
func zonalPool(name string, types ...string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": name}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types},
	}
	return np
}

func zoneAPod(name, pool string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"node-type": pool, corev1.LabelTopologyZone: "zone-a"},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
	}}
}

// The cheapest offering is out of capacity: the launch uses the next one
// the NodeClaim allows.
func TestInsufficientCapacityFallsBackToTheNextOffering(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t), cloudprovider.Offering{InstanceType: "c-2x-amd64-linux", Zone: "zone-a", CapacityType: "on-demand"})
	ensureNodeClass(ctx, t, kube)
	if err := kube.Create(ctx, zonalPool("fallback", "c-2x-amd64-linux", "c-4x-amd64-linux")); err != nil {
		t.Fatal(err)
	}
	pod := zoneAPod("fallback-pod", "fallback")
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("the pod never ran: %v", err)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[corev1.LabelInstanceTypeStable] != "c-4x-amd64-linux" || node.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("launched %s in %s; want the next offering, c-4x in zone-a", node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone])
	}
}

// Every offering a NodeClaim allows is out of capacity: the NodeClaim is
// deleted, the offering is remembered, and the pod's reason says so.
func TestInsufficientCapacityDeletesTheNodeClaimAndExplains(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t), cloudprovider.Offering{InstanceType: "c-2x-amd64-linux", Zone: "zone-a", CapacityType: "on-demand"})
	ensureNodeClass(ctx, t, kube)
	if err := kube.Create(ctx, zonalPool("scarce", "c-2x-amd64-linux")); err != nil {
		t.Fatal(err)
	}
	pod := zoneAPod("scarce-pod", "scarce")
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var reason string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "scarce-pod" && e.Reason == "FailedScheduling" && strings.Contains(e.Message, "available offering") {
				reason = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var events corev1.EventList
		_ = kube.List(ctx, &events, client.InNamespace("default"))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "scarce-pod" || strings.HasPrefix(e.InvolvedObject.Name, "scarce") {
				t.Logf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		var claims karpv1.NodeClaimList
		_ = kube.List(ctx, &claims)
		for _, nc := range claims.Items {
			t.Logf("claim %s deleting=%v conds=%v", nc.Name, nc.DeletionTimestamp != nil, nc.Status.Conditions)
		}
		t.Fatalf("no FailedScheduling event naming the unavailable offering: %v", err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "scarce"}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp == nil {
			t.Errorf("NodeClaim %s outlives its refused launch", nc.Name)
		}
	}
	t.Logf("reason: %s", reason)
}
