//go:build integration

// Package kwok_test runs the kwok provider against a real kube-apiserver and
// kube-scheduler, with Nodewright's emulated kubelet and, in a second control
// plane, with the real kwok controller (sigs.k8s.io/kwok) instead.
package kwok_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/kwok"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	code := controlplane.Main(m, controlplane.Options{Scheduler: true}, &cp)
	if err := stopRealKWOK(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestLaunchedNodeRunsScheduledPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := scheme(t)
	kube, err := client.New(cp.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kwok.NewKubelet(mgr.GetClient(), clock.RealClock{}, kwok.KubeletOptions{RegistrationDelay: time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	types, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	provider := kwok.New(kube, types)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "kwok-e2e"}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	launched, err := provider.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}

	// The emulated kubelet reports Ready and drops the API server's
	// not-ready taint; the unregistered taint stays for registration.
	var node corev1.Node
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKey{Name: "kwok-e2e"}, &node); err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				for _, taint := range node.Spec.Taints {
					if taint.Key == corev1.TaintNodeNotReady {
						return false, nil
					}
				}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the node never turned Ready without its not-ready taint: %v\n%+v", err, node)
	}
	if node.Spec.ProviderID != launched.Status.ProviderID || node.Labels[corev1.LabelInstanceTypeStable] != "m5.large" {
		t.Errorf("node provider ID %q labels %v", node.Spec.ProviderID, node.Labels)
	}

	// kube-scheduler binds a pod to it; the kubelet runs it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-kwok", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: "kwok-e2e"},
			Tolerations:  []corev1.Toleration{{Key: karpv1.TaintKeyUnregistered, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		},
	}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Spec.NodeName == "kwok-e2e" && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod not running on the kwok node: node %q phase %s: %v", pod.Spec.NodeName, pod.Status.Phase, err)
	}

	// Deleting the instance removes the node.
	if err := provider.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := provider.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get after Delete: %v", err)
	}
}
