package provisioning

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// unlaunched is a NodeClaim of np as the provisioner writes it, sized for
// cpu (and one pod) with these instance-type options, that has no provider
// ID yet.
func unlaunched(t *testing.T, np *karpv1.NodePool, name string, options []string, cpu string) *karpv1.NodeClaim {
	t.Helper()
	nc, err := NodeClaimFor(np, sched.NodeClaim{NodePool: np.Name,
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: options}},
		Requests:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("1")}})
	if err != nil {
		t.Fatal(err)
	}
	nc.Name = name
	return nc
}

// failingLaunch marks a claim as the lifecycle controller does when Create
// fails with an error that is not about capacity (a 5xx, a NodeClass
// problem): it stays, unlaunched, until the launch TTL.
func failingLaunch(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionUnknown, Reason: "LaunchFailed",
		Message: "creating instance: 503 Service Unavailable", LastTransitionTime: metav1.Now()}}
	return nc
}

func batchPool() *karpv1.NodePool {
	return kwokPool("batch", func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "batch"} })
}

func onlyBatch(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{"team": "batch"}
	return p
}

// A claim of one pool that keeps failing to launch holds back only the
// pods planned onto it: a pod that only another pool can take gets its
// NodeClaim in the next round, and so do an interrupted node's pods.
func TestAFailingLaunchStallsNoOtherPool(t *testing.T) {
	cases := []struct {
		name   string
		decide func(context.Context, env) ([]*karpv1.NodeClaim, error)
	}{
		{"a provisioning round", func(ctx context.Context, e env) ([]*karpv1.NodeClaim, error) {
			e.cluster.UpdatePod(onlyBatch(pendingPod("job", "1")))
			return e.provisioner.Provision(ctx)
		}},
		{"an interrupted node's pods", func(ctx context.Context, e env) ([]*karpv1.NodeClaim, error) {
			moving := onlyBatch(pendingPod("job", "1"))
			moving.Spec.NodeName = "interrupted"
			return e.provisioner.ProvisionFor(ctx, "interrupted", []*corev1.Pod{moving})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			web := kwokPool("web")
			e := newEnv(t, web, batchPool())
			stuck := failingLaunch(unlaunched(t, web, "web-stuck", []string{"small"}, "1"))
			e.cluster.UpdateNodeClaim(stuck)
			waiting := pendingPod("web-app", "1")
			e.cluster.UpdatePod(waiting)
			e.cluster.Nominate([]*corev1.Pod{waiting}, stuck.Name, e.provisioner.opts.NominationTTL)

			created, err := tc.decide(ctx, e)
			if err != nil || len(created) != 1 || created[0].Labels[karpv1.LabelNodePool] != "batch" {
				t.Fatalf("created %v (err %v), want one NodeClaim of the batch pool", claimPools(created), err)
			}
			if cpu := created[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "1" {
				t.Errorf("requests %v, want only the batch pod's", created[0].Spec.Resources.Requests)
			}
		})
	}
}

// After a restart no pod is nominated any more, yet an unlaunched claim
// may already own an instance: a pending pod it was sized for goes onto it
// (nominated there) rather than being bought a second node, while a pod it
// has no room for gets its own NodeClaim.
func TestAfterARestartPendingPodsGoOntoUnlaunchedClaims(t *testing.T) {
	ctx := context.Background()
	web := kwokPool("web")
	e := newEnv(t, web) // a fresh model: nothing nominated
	e.cluster.UpdateNodeClaim(unlaunched(t, web, "web-launching", []string{"small", "large"}, "1"))
	e.cluster.UpdatePod(pendingPod("planned", "1"))
	e.cluster.UpdatePod(pendingPod("newcomer", "1500m"))

	created, err := e.provisioner.Provision(ctx)
	if err != nil || len(created) != 1 {
		t.Fatalf("created %d NodeClaims (err %v), want one, for the newcomer", len(created), err)
	}
	if cpu := created[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "1500m" {
		t.Errorf("the new claim asks for %v: the planned pod was bought for twice", created[0].Spec.Resources.Requests)
	}
	if got := e.cluster.NominationOf("default", "planned"); got != "web-launching" {
		t.Errorf("the planned pod is nominated to %q, want the unlaunched claim", got)
	}
	// A second round buys nothing more.
	if again, err := e.provisioner.Provision(ctx); err != nil || len(again) != 0 {
		t.Errorf("second round: %d NodeClaims, %v", len(again), err)
	}
}

// A pool's limits count each claim still launching as its largest
// instance-type option: whatever the launches pick, the pool stays within
// its limits.
func TestLimitsCountLaunchingClaimsByTheirLargestOption(t *testing.T) {
	cases := []struct {
		name string
		// options of the launching claim (small: 2 CPU, large: 8 CPU).
		options []string
		// unschedulable: pods refused for the limit, of b and c (1500m each).
		unschedulable int
	}{
		{"small or large counts as large", []string{"small", "large"}, 1},
		{"small only counts as small", []string{"small"}, 0},
		{"a type gone from the catalog counts as the pool's largest", []string{"retired"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			capped := kwokPool("capped", func(np *karpv1.NodePool) {
				np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
			})
			e := newEnv(t, capped)
			nc := unlaunched(t, capped, "capped-launching", tc.options, "1")
			e.cluster.UpdateNodeClaim(nc)
			first := pendingPod("a", "1")
			e.cluster.UpdatePod(first)
			e.cluster.Nominate([]*corev1.Pod{first}, nc.Name, e.provisioner.opts.NominationTTL)
			e.cluster.UpdatePod(pendingPod("b", "1500m"))
			e.cluster.UpdatePod(pendingPod("c", "1500m"))

			created, err := e.provisioner.Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			launching := map[string]int64{"small": 2, "large": 8, "retired": 8}[tc.options[len(tc.options)-1]]
			worst := launching
			for _, c := range created {
				worst += largestCPU(c)
			}
			if worst > 10 {
				t.Errorf("the launches may take %d CPUs, over the limit of 10 (claims %v)", worst, claimPools(created))
			}
			refused := 0
			for _, ev := range events(e.recorder) {
				if strings.Contains(ev, ReasonFailedScheduling) && strings.Contains(ev, "limits exceeded") {
					refused++
				}
			}
			if refused != tc.unschedulable {
				t.Errorf("%d pods refused for the limit, want %d", refused, tc.unschedulable)
			}
		})
	}
}

// largestCPU is the CPU of a claim's largest option in newEnv's catalog.
func largestCPU(nc *karpv1.NodeClaim) int64 {
	var most int64
	for _, r := range nc.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable {
			continue
		}
		for _, v := range r.Values {
			most = max(most, map[string]int64{"small": 2, "large": 8}[v])
		}
	}
	return most
}

func claimPools(ncs []*karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Name+"@"+nc.Labels[karpv1.LabelNodePool])
	}
	return out
}
