//go:build integration

package chaos_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// apiFaults are the rates at which the controller's writes fail: answered
// 500 without being performed, answered 409 Conflict without being
// performed, or performed with the answer lost (a 500 instead).
var apiFaults = controlplane.FaultOptions{WriteErrorRate: 0.05, ConflictRate: 0.03, LostAnswerRate: 0.03}

// faultProxy starts a fault proxy seeded with seed in front of the
// apiserver, for the controller's kubeconfig, until the test ends.
func faultProxy(t *testing.T, seed int64) *controlplane.FaultProxy {
	t.Helper()
	opts := apiFaults
	opts.Seed = seed
	p, err := controlplane.StartFaultProxy(context.Background(), cp, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	t.Logf("the controller's writes fail at rates %.0f%% errors, %.0f%% conflicts, %.0f%% lost answers (seed %d)",
		100*opts.WriteErrorRate, 100*opts.ConflictRate, 100*opts.LostAnswerRate, seed)
	return p
}

// checkFaults fails the test if a fault kind was never injected: the run
// then proved nothing about it.
func checkFaults(t *testing.T, seed int64, c controlplane.FaultCounts) {
	t.Helper()
	if c.WriteErrors == 0 || c.Conflicts == 0 || c.LostAnswers == 0 {
		t.Errorf("seed %d: a kind of API fault was never injected (%s): the run did not exercise it", seed, c)
	}
}

// vanish takes a node's instance away: kwok's instance is its Node, so
// the Node is deleted by someone other than Nodewright (as the simulator
// does). It returns the node's provider ID.
func vanish(ctx context.Context, t *testing.T, kube client.Client, n *corev1.Node) string {
	t.Helper()
	if err := kube.Delete(ctx, n); err != nil {
		t.Fatalf("deleting node %s (its instance vanished): %v", n.Name, err)
	}
	return n.Spec.ProviderID
}

// notReady sets a node's Ready condition Unknown, as the node lifecycle
// controller does when a kubelet stops posting status.
func notReady(ctx context.Context, t *testing.T, kube client.Client, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		for i := range n.Status.Conditions {
			if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
				c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "chaos test: kubelet stopped posting node status"
				c.LastTransitionTime, c.LastHeartbeatTime = now, now
			}
		}
		return kube.Status().Update(ctx, n)
	})
	if err != nil {
		t.Fatalf("setting node %s NotReady: %v", name, err)
	}
}

// pickNodes draws n distinct live nodes of s that carry pods of the app.
func pickNodes(rng *rand.Rand, s *clusterState, n int) []corev1.Node {
	used := map[string]bool{}
	for _, p := range s.pods {
		used[p.Spec.NodeName] = true
	}
	var busy []corev1.Node
	for _, node := range s.nodes {
		if used[node.Name] && node.DeletionTimestamp == nil {
			busy = append(busy, node)
		}
	}
	rng.Shuffle(len(busy), func(i, j int) { busy[i], busy[j] = busy[j], busy[i] })
	return busy[:min(n, len(busy))]
}

// gone names what is left of a vanished instance: a Node or a NodeClaim
// still carrying its provider ID.
func (s *clusterState) gone(providerID string) []string {
	var out []string
	for _, n := range s.nodes {
		if n.Spec.ProviderID == providerID {
			out = append(out, fmt.Sprintf("vanished node %s still present (deleting %t)", n.Name, n.DeletionTimestamp != nil))
		}
	}
	if nc := s.claimOf(providerID); nc != nil {
		out = append(out, fmt.Sprintf("nodeclaim %s of vanished instance %s still present (deleting %t)", nc.Name, providerID, nc.DeletionTimestamp != nil))
	}
	return out
}
