//go:build integration

package provisioning_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
)

// Two replicas with leader election: one pending pod gets one node, not one
// per replica; when a replica stops, the other carries on.
func TestLeaderElectionRunsOneReplica(t *testing.T) {
	ctx := context.Background()
	types := testCatalog(t)
	admin, err := client.New(cp.Config, client.Options{Scheme: mustScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeClass(ctx, t, admin)
	if err := admin.Create(ctx, zonalPool("leader", "c-2x-amd64-linux")); err != nil {
		t.Fatal(err)
	}
	var stops []func()
	for range 2 {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- operator.Run(runCtx, cp.Config, operator.Config{
				CloudProvider: "kwok", InstanceTypes: types, KWOKKubelet: true, RegistrationDelay: time.Second,
				BatchIdle: time.Second, BatchMax: 5 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
				MetricsAddr: "0", HealthAddr: "0", Logger: logr.Discard(), Embedded: true,
				LeaderElection: true, LeaderElectionNamespace: "kube-system",
			})
		}()
		stop := func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica: %v", err)
			}
		}
		stops = append(stops, stop)
		t.Cleanup(func() {
			if runCtx.Err() == nil {
				stop()
			}
		})
	}

	running := func(pod *corev1.Pod) error {
		if err := admin.Create(ctx, pod); err != nil {
			return err
		}
		return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, err
			}
			return pod.Status.Phase == corev1.PodRunning, nil
		})
	}
	claimCount := func() int {
		t.Helper()
		var claims karpv1.NodeClaimList
		if err := admin.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "leader"}); err != nil {
			t.Fatal(err)
		}
		return len(claims.Items)
	}

	if err := running(zoneAPod("leader-1", "leader")); err != nil {
		t.Fatalf("the first pod never ran: %v", err)
	}
	time.Sleep(3 * time.Second) // a second replica acting would have bought by now
	if n := claimCount(); n != 1 {
		t.Fatalf("%d NodeClaims for one pod with two replicas, want 1", n)
	}
	// Whichever replica stops, the survivor (leading already, or taking the
	// released lease) provisions the next pod, which needs a node of its own.
	stops[0]()
	big := zoneAPod("leader-2", "leader")
	big.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	if err := running(big); err != nil {
		t.Fatalf("after a replica stopped, the next pod never ran: %v", err)
	}
	if n := claimCount(); n != 2 {
		t.Errorf("%d NodeClaims, want 2", n)
	}
}
