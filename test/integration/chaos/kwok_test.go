//go:build integration

package chaos_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

const (
	kwokPool = "chaos-kwok"
	kwokApp  = "chaos-kwok"
)

// kwokCatalog: 2, 4 and 8 CPUs in two zones, on demand, the larger ones
// cheaper per CPU, so merging underused nodes pays.
const kwokCatalog = `[
{"name": "c-2x", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"},
 "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.10}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.10}]},
{"name": "c-4x", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "4", "memory": "16Gi", "pods": "110"},
 "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.16}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.16}]},
{"name": "c-8x", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "8", "memory": "32Gi", "pods": "110"},
 "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.28}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.28}]}
]`

// kwokTiers: the app's four Deployments of different pod sizes.
var kwokTiers = []struct{ name, cpu string }{
	{"chaos-xs", "250m"}, {"chaos-s", "500m"}, {"chaos-m", "1"}, {"chaos-l", "1500m"},
}

// The controller (kwok provider) is SIGKILLed 20 times, restarted at once
// each time, while its writes to the API fail (apiFaults: errors,
// conflicts, answers lost after the write): 10 times at random instants
// while 40 pods of four sizes get nodes; once just after a busy node's
// instance vanished (its Node deleted under Nodewright) and another node
// turned NotReady, after which the vanished node's NodeClaim must go and
// every pod run again; 9 times while the app shrinks to 4 pods and the pool empties
// and consolidates (deleting nodes, and replacing the last large one by a
// cheaper one) (half of those kills land just after a disruption
// decision shows in the API: a disrupted taint, a DisruptionReason, a
// NodeClaim being deleted). Once it runs undisturbed, the pool must
// settle with at most one node per NodeClaim at every instant, no node
// without a NodeClaim, every pod Running, and no disrupted taint or
// DisruptionReason left on a NodeClaim that is not being deleted.
func TestControllerKilledDuringScaleUpAndConsolidationKWOK(t *testing.T) {
	ctx := context.Background()
	seed := chaosSeed(t)
	kube := adminClient(t)
	t.Cleanup(func() { controlplane.Cleanup(t, kube, managedLists()...) }) // runs after the controller stops

	if err := kube.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	create(ctx, t, kube, kwokNodePool())
	catalogFile := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(catalogFile, []byte(kwokCatalog), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := faultProxy(t, seed)
	ctrl := startChild(t, "controller", controllerBin, "controller", "--cloud-provider", "kwok", "--kubeconfig", proxy.Kubeconfig, "--catalog", catalogFile,
		"--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--batch-idle-duration", "1s", "--batch-max-duration", "5s", "--kwok-registration-delay", "1s")
	read := func(ctx context.Context) (*clusterState, error) { return readCluster(ctx, kube, kwokPool, kwokApp) }
	mon := startMonitor(t, read, time.Second)
	k := newKiller(t, ctrl, seed)

	const up, down = 10, 1 // 40 pods, 32.5 CPUs; then 4 pods, 3.25 CPUs: a c-4x replaces the last c-8x
	for _, tier := range kwokTiers {
		create(ctx, t, kube, app(tier.name, kwokApp, kwokPool, tier.cpu, up))
	}
	for range 10 {
		k.randomKill(500*time.Millisecond, 5*time.Second)
	}
	want := int32(up * len(kwokTiers))
	s, why := settle(ctx, t, "scale-up", 3*time.Minute, read, func(s *clusterState) []string {
		if n, _ := s.running(); n != int(want) {
			return []string{fmt.Sprintf("%d of %d pods Running", n, want)}
		}
		return nil
	}, ctrl)
	if why != nil {
		t.Fatalf("seed %d: after %d kills during scale-up, not every pod runs: %v\n%s\nkills:\n%s\ncontroller log tail:\n%s",
			seed, ctrl.kills, why, s, k.summary(), ctrl.tail(40))
	}
	nodesUp := len(s.nodes)

	// Node failures: one busy node's instance vanishes, another turns
	// NotReady, and the controller is killed once more; the vanished
	// node's NodeClaim must go and its pods find room elsewhere.
	failed := pickNodes(rand.New(rand.NewSource(seed)), s, 2)
	if len(failed) < 2 {
		t.Fatalf("seed %d: fewer than 2 busy nodes after scale-up:\n%s", seed, s)
	}
	vanished := vanish(ctx, t, kube, &failed[0])
	notReady(ctx, t, kube, failed[1].Name)
	t.Logf("node failures: %s vanished (%s), %s NotReady", failed[0].Name, vanished, failed[1].Name)
	k.randomKill(500*time.Millisecond, 3*time.Second)
	s, why = settle(ctx, t, "node failures", 2*time.Minute, read, func(s *clusterState) []string {
		out := s.gone(vanished)
		if n, _ := s.running(); n != int(want) {
			out = append(out, fmt.Sprintf("%d of %d pods Running", n, want))
		}
		return out
	}, ctrl)
	if why != nil {
		t.Fatalf("seed %d: after node %s vanished and %s turned NotReady, the pool did not recover: %v\n%s\nkills:\n%s\ncontroller log tail:\n%s",
			seed, failed[0].Name, failed[1].Name, why, s, k.summary(), ctrl.tail(40))
	}

	for _, tier := range kwokTiers {
		scale(ctx, t, kube, tier.name, down)
	}
	want = int32(down * len(kwokTiers))
	disrupting := func(ctx context.Context) bool {
		s, err := read(ctx)
		return err == nil && s.disrupting()
	}
	for range 9 {
		if k.coin(0.5) {
			k.killWhen(ctx, "a disruption in flight", disrupting, 25*time.Second, 2*time.Second)
		} else {
			k.randomKill(time.Second, 8*time.Second)
		}
	}
	final, why := settle(ctx, t, "recovery", 3*time.Minute, read, func(s *clusterState) []string {
		var out []string
		if n, _ := s.running(); n != int(want) {
			out = append(out, fmt.Sprintf("%d of %d pods Running", n, want))
		}
		out = append(out, s.leaked()...)
		out = append(out, s.stuckTaints()...)
		out = append(out, s.stuckDecisions()...)
		return append(out, s.unsettled(true)...)
	}, ctrl)
	saw := mon.stop()
	faults := proxy.Counts()
	report(t, seed, k, final, why, saw, fmt.Sprintf("%d nodes after scale-up, %d at the end; 1 instance vanished, 1 node NotReady; API faults: %s", nodesUp, len(final.nodes), faults), int(want))
	checkFaults(t, seed, faults)
}

// kwokNodePool consolidates empty and underused nodes 5 s after their
// last pod change, half the pool at a time.
func kwokNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: kwokPool}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"node-type": kwokPool}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("5s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "50%"}}
	return np
}
