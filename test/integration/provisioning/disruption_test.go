//go:build integration

package provisioning_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// A node left empty goes once consolidateAfter has passed (plus the 15 s
// validation), and not before; its pod's departure is what starts the
// clock.
func TestEmptyNodeIsRemovedAfterConsolidateAfter(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t))
	ensureNodeClass(ctx, t, kube)
	np := zonalPool("shrink", "c-2x-amd64-linux")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("5s")
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	pod := zoneAPod("shrink-pod", "shrink")
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the pod never ran: %v", err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "shrink"}); err != nil || len(claims.Items) != 1 {
		t.Fatalf("nodeclaims %d, %v: want one", len(claims.Items), err)
	}
	claim := claims.Items[0]

	// Busy: it stays, whatever the time.
	time.Sleep(20 * time.Second)
	if err := kube.Get(ctx, client.ObjectKeyFromObject(&claim), &claim); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("the busy node's NodeClaim: %v, deleting %v", err, claim.DeletionTimestamp)
	}

	if err := kube.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	emptied := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(&claim), &claim)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("the empty node's NodeClaim is still there: %v", err)
	}
	took := time.Since(emptied)
	t.Logf("the empty node went %s after its pod", took.Round(time.Second))
	if took < 5*time.Second+15*time.Second {
		t.Errorf("removed %s after emptying: before consolidateAfter (5s) and the validation (15s) passed", took)
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: "shrink"}); err != nil || len(nodes.Items) != 0 {
		t.Errorf("nodes left %d (%v): want the node and its instance gone", len(nodes.Items), err)
	}
	if n := metricValue(t, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "shrink", "reason": "empty"}); n != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{nodepool=shrink,reason=empty} = %v, want 1", n)
	}
}
