//go:build integration

package provisioning_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

// guarded runs replicas small pods of app on one NodePool's nodes, behind a
// PDB, and waits for them to run; it returns the NodeClaim they run on.
func guarded(ctx context.Context, t *testing.T, kube client.Client, app string, replicas int32, pdb policyv1.PodDisruptionBudgetSpec, tgp time.Duration, podGrace int64) *karpv1.NodeClaim {
	t.Helper()
	ensureNodeClass(ctx, t, kube)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: app}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": app}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"node-type": app},
				TerminationGracePeriodSeconds: &podGrace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			}}},
	}
	if err := kube.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	pdb.Selector = &metav1.LabelSelector{MatchLabels: labels}
	if err := kube.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"}, Spec: pdb}); err != nil {
		t.Fatal(err)
	}
	var claims karpv1.NodeClaimList
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if running(ctx, t, kube, app) != int(replicas) {
			return false, nil
		}
		if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: app}); err != nil {
			return false, err
		}
		return len(claims.Items) == 1, nil
	})
	if err != nil {
		t.Fatalf("%s: pods not running on one node: %v", app, err)
	}
	return &claims.Items[0]
}

// running counts the app's pods that are Running and not terminating.
func running(ctx context.Context, t *testing.T, kube client.Client, app string) int {
	n, err := countRunning(ctx, kube, app)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countRunning(ctx context.Context, kube client.Client, app string) (int, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

func gone(ctx context.Context, kube client.Client, obj client.Object) bool {
	return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(obj), obj))
}

// Deleting a NodeClaim drains its node through the Eviction API: with a PDB
// of maxUnavailable 1, never more than one pod is away; the pods move to a
// new node; the old node, instance and NodeClaim go.
func TestDeletingANodeClaimDrainsItWithinThePDB(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t))
	maxUnavailable := intstr.FromInt32(1)
	nc := guarded(ctx, t, kube, "guarded", 3, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable}, time.Hour, 30)
	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}}

	var lowest atomic.Int32
	lowest.Store(3)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go func() {
		for watchCtx.Err() == nil {
			if n, err := countRunning(watchCtx, kube, "guarded"); err == nil && int32(n) < lowest.Load() {
				lowest.Store(int32(n))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return gone(ctx, kube, nc) && gone(ctx, kube, oldNode) && running(ctx, t, kube, "guarded") == 3, nil
	})
	stopWatching()
	if err != nil {
		t.Fatalf("the drain did not finish: nodeclaim gone %v, node gone %v, running %d", gone(ctx, kube, nc), gone(ctx, kube, oldNode), running(ctx, t, kube, "guarded"))
	}
	if n := lowest.Load(); n < 2 {
		t.Errorf("at one point only %d of 3 pods were running: the PDB allows one away", n)
	}
}

// A PDB that allows no disruption holds the drain until the NodePool's
// terminationGracePeriod expires; then the pods are deleted and the node
// goes. (A pod is deleted when the deadline minus its own grace period is
// reached, so these pods get a 1 s grace period to make the hold visible.)
func TestTerminationGracePeriodOverridesABlockingPDB(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t))
	zero := intstr.FromInt32(0)
	const tgp = 15 * time.Second
	nc := guarded(ctx, t, kube, "blocked", 2, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero}, tgp, 1)
	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}}
	deleted := time.Now()
	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if gone(ctx, kube, oldNode) {
		t.Fatal("the node went while its PDB allowed no disruption and the grace period had not expired")
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return gone(ctx, kube, nc) && gone(ctx, kube, oldNode), nil
	})
	if err != nil {
		t.Fatalf("the node never went: %v", err)
	}
	if took := time.Since(deleted); took < tgp-2*time.Second {
		t.Errorf("the node went after %s, before the %s grace period less the pods' 1 s", took, tgp)
	}
}
