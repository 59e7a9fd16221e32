//go:build integration

package provisioning_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/providers/kwok"
)

// The controller died after its provider launched an instance but before
// the NodeClaim recorded the provider ID, and another launch's NodeClaim
// was lost altogether. Started again, it adopts the first instance
// (launching nothing twice) and terminates the orphan.
func TestRestartMidLaunchLaunchesNothingTwiceAndLeavesNoOrphan(t *testing.T) {
	ctx := context.Background()
	types := testCatalog(t)
	admin, err := client.New(cp.Config, client.Options{Scheme: mustScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeClass(ctx, t, admin)
	pool := zonalPool("restart", "c-2x-amd64-linux")
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pod := zoneAPod("restart-pod", "restart")
	if err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// The state the crash left: a NodeClaim without a provider ID whose
	// instance exists, and an instance whose NodeClaim is gone.
	claim, err := provisioning.NodeClaimFor(pool, sched.NodeClaim{
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c-2x-amd64-linux"}},
			{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}},
		},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
	})
	if err != nil {
		t.Fatal(err)
	}
	claim.GenerateName, claim.Name = "", "restart-crashed"
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	provider := kwok.New(admin, types)
	if _, err := provider.Create(ctx, claim); err != nil {
		t.Fatalf("launching the instance the crash left behind: %v", err)
	}
	lost := claim.DeepCopy()
	lost.Name = "restart-lost"
	if _, err := provider.Create(ctx, lost); err != nil {
		t.Fatalf("launching the orphan: %v", err)
	}

	startControllersWith(t, func(c *operator.Config) {
		c.InstanceTypes, c.OrphanInstanceAge = types, 2*time.Second
	})
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		orphanGone := apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: "restart-lost"}, &corev1.Node{}))
		return pod.Status.Phase == corev1.PodRunning && orphanGone, nil
	})
	if err != nil {
		t.Fatalf("pod phase %s on %q; the orphan instance gone: %v", pod.Status.Phase, pod.Spec.NodeName,
			apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: "restart-lost"}, &corev1.Node{})))
	}
	if pod.Spec.NodeName != "restart-crashed" {
		t.Errorf("the pod runs on %q, want the adopted instance restart-crashed", pod.Spec.NodeName)
	}
	var claims karpv1.NodeClaimList
	if err := admin.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "restart"}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 || claims.Items[0].Status.ProviderID != kwok.ProviderIDPrefix+"restart-crashed" {
		t.Errorf("nodeclaims of the pool: %d (want the one, adopted); first: %+v", len(claims.Items), claims.Items)
	}
	var nodes corev1.NodeList
	if err := admin.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: "restart"}); err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			live = append(live, n.Name)
		}
	}
	if len(live) != 1 {
		t.Errorf("instances of the pool: %v, want only restart-crashed", live)
	}
}

func mustScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
