//go:build integration

package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var (
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := controlplane.FindBinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{BinDir: dir, ControllerManager: true, Scheduler: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		return 1
	}
	pids := cp.Pids()
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		code = 1
	}
	// No component may outlive Stop.
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			fmt.Fprintf(os.Stderr, "process %d is still running after Stop\n", pid)
			code = 1
		}
	}
	if _, err := os.Stat(cp.Dir); !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "control-plane directory %s left behind\n", cp.Dir)
		code = 1
	}
	return code
}

func kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	if client == nil {
		c, err := kubernetes.NewForConfig(cp.Config)
		if err != nil {
			t.Fatal(err)
		}
		client = c
	}
	return client
}

func namespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns, err := kube(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cp-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// With kube-controller-manager and kube-scheduler running, a Deployment gets
// pods, the pods bind to a Ready node, and a PDB's status is computed.
func TestWorkloadsScheduleOntoAReadyNode(t *testing.T) {
	ctx := context.Background()
	c := kube(t)
	ns := namespace(ctx, t)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelHostname: "node-a"}},
	}
	node, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), "node-a", metav1.DeleteOptions{}) })
	hasNotReadyTaint := false
	for _, taint := range node.Spec.Taints {
		hasNotReadyTaint = hasNotReadyTaint || taint.Key == corev1.TaintNodeNotReady
	}
	if !hasNotReadyTaint {
		t.Errorf("the API server did not taint the new node %s: %v", corev1.TaintNodeNotReady, node.Spec.Taints)
	}
	// Play the kubelet: report capacity and Ready, then drop the not-ready taint.
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), Reason: "KubeletReady"}}
	if node, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = nil
	if _, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var bound int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound = 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "node-a" {
				bound++
			}
		}
		return bound == 3, nil
	})
	if err != nil {
		t.Fatalf("want 3 pods created by the Deployment and bound by the scheduler to node-a, got %d: %v", bound, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == 3, nil
	})
	if err != nil {
		t.Fatalf("the disruption controller did not compute the PDB's status: %v", err)
	}
}

// A pod that fits no node is marked Unschedulable by the scheduler: the
// signal Nodewright provisions on.
func TestUnfittablePodIsMarkedUnschedulable(t *testing.T) {
	ctx := context.Background()
	c := kube(t)
	ns := namespace(ctx, t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}},
		}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the scheduler did not mark the pod Unschedulable: %v", err)
	}
}
