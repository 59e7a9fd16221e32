package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// gateTimeout bounds how long a create waits for the others it expects to
// be in flight with it: reached only when they never come (creates made
// one after another), and then the create fails.
const gateTimeout = 10 * time.Second

// gate holds each create until want creates are in flight together, and
// records the most that ever were.
type gate struct {
	want int

	mu       sync.Mutex
	inFlight int
	most     int
	waiting  []chan struct{}
}

// enter counts a create in flight and waits for want of them; false when
// they never came.
func (g *gate) enter() bool {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	ch := make(chan struct{})
	g.waiting = append(g.waiting, ch)
	if len(g.waiting) >= g.want {
		for _, w := range g.waiting {
			close(w)
		}
		g.waiting = nil
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-time.After(gateTimeout):
		return false
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
}

func (g *gate) mostInFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// intercepted is e with its provisioner writing through an API whose
// NodeClaim creates go through create (other writes pass), creating
// workers NodeClaims at once.
func intercepted(e env, workers int, create func(ctx context.Context, c client.WithWatch, nc *karpv1.NodeClaim) error) env {
	e.kube = interceptor.NewClient(e.kube.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if nc, ok := obj.(*karpv1.NodeClaim); ok {
				return create(ctx, c, nc)
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	opts := e.provisioner.opts
	opts.CreateWorkers = workers
	e.provisioner = NewProvisioner(e.kube, e.provisioner.provider, e.cluster, e.recorder, opts)
	return e
}

// throughGate creates nc once g lets it, failing when the others it waits
// for never come.
func throughGate(g *gate) func(context.Context, client.WithWatch, *karpv1.NodeClaim) error {
	return func(ctx context.Context, c client.WithWatch, nc *karpv1.NodeClaim) error {
		defer g.leave()
		if !g.enter() {
			return fmt.Errorf("%d NodeClaim creates never were in flight together", g.want)
		}
		return c.Create(ctx, nc)
	}
}

// bigPods adds n pending pods of 5 CPUs: each needs a large node of its
// own (8 CPUs), so a decision buys one NodeClaim per pod.
func bigPods(e env, prefix string, n int, mutate ...func(*corev1.Pod) *corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := pendingPod(fmt.Sprintf("%s-%d", prefix, i), "5")
		for _, m := range mutate {
			p = m(p)
		}
		e.cluster.UpdatePod(p)
		out = append(out, p)
	}
	return out
}

// The NodeClaims of one decision are created together, as many at once as
// the workers allow and never more: a decision for a thousand pods is one
// wave of API calls, not a queue of them.
func TestTheClaimsOfADecisionAreCreatedTogether(t *testing.T) {
	cases := []struct {
		name     string
		workers  int
		inFlight int // creates in flight together, of 4
	}{
		{"one worker: one after another", 1, 1},
		{"two workers: two at a time", 2, 2},
		{"more workers than claims: all at once", 20, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{want: tc.inFlight}
			e := intercepted(newEnv(t, kwokPool("web")), tc.workers, throughGate(g))
			bigPods(e, "big", 4)

			created, err := e.provisioner.Provision(context.Background())
			if err != nil || len(created) != 4 {
				t.Fatalf("created %d NodeClaims (err %v), want 4", len(created), err)
			}
			if got := g.mostInFlight(); got != tc.inFlight {
				t.Errorf("%d creates were in flight together, want %d", got, tc.inFlight)
			}
		})
	}
}

// One create failing stops none of the others: they are created, counted
// and their pods nominated, the error names the pool that failed, and the
// pod of the failed claim stays provisionable, so the next round buys it.
func TestOneFailedCreateStopsNoOther(t *testing.T) {
	ctx := context.Background()
	g := &gate{want: 4}
	var recovered atomic.Bool
	failBatch := func(ctx context.Context, c client.WithWatch, nc *karpv1.NodeClaim) error {
		defer g.leave()
		if !g.enter() {
			return errors.New("the creates were not in flight together")
		}
		if nc.Labels[karpv1.LabelNodePool] == "batch" && !recovered.Load() {
			return apierrors.NewInternalError(errors.New("etcd is unhappy"))
		}
		return c.Create(ctx, nc)
	}
	e := intercepted(newEnv(t, kwokPool("web"), batchPool()), 20, failBatch)
	web := bigPods(e, "web", 3)
	batch := bigPods(e, "batch", 1, onlyBatch)[0]

	created, err := e.provisioner.Provision(ctx)
	if err == nil || !strings.Contains(err.Error(), "nodepool batch") {
		t.Errorf("error %v, want one naming the batch pool", err)
	}
	if len(created) != 3 {
		t.Fatalf("created %v, want the 3 NodeClaims of the web pool", claimPools(created))
	}
	list := &karpv1.NodeClaimList{}
	if err := e.kube.List(ctx, list); err != nil || len(list.Items) != 3 {
		t.Fatalf("the API holds %d NodeClaims (%v), want 3", len(list.Items), err)
	}
	names := map[string]bool{}
	for _, nc := range created {
		names[nc.Name] = true
	}
	for _, p := range web {
		if got := e.cluster.NominationOf(p.Namespace, p.Name); !names[got] {
			t.Errorf("pod %s is nominated to %q, want one of the created claims", p.Name, got)
		}
	}
	if got := e.cluster.NominationOf(batch.Namespace, batch.Name); got != "" {
		t.Errorf("the batch pod is nominated to %q, a claim that was never created", got)
	}
	nominated := 0
	for _, ev := range events(e.recorder) {
		if strings.Contains(ev, ReasonNominated) {
			nominated++
		}
	}
	if nominated != 3 {
		t.Errorf("%d Nominated events, want 3 (one per pod of a created claim)", nominated)
	}
	want := `
# HELP karpenter_nodeclaims_created_total Number of nodeclaims created, by reason, nodepool and whether minValues were relaxed.
# TYPE karpenter_nodeclaims_created_total counter
karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="web",reason="provisioned"} 3
`
	if err := testutil.GatherAndCompare(e.metrics, strings.NewReader(want), "karpenter_nodeclaims_created_total"); err != nil {
		t.Error(err)
	}

	// The API recovers: the next round buys the batch pod alone.
	g.mu.Lock()
	g.want = 1
	g.mu.Unlock()
	recovered.Store(true)
	again, err := e.provisioner.Provision(ctx)
	if err != nil || len(again) != 1 || again[0].Labels[karpv1.LabelNodePool] != "batch" {
		t.Errorf("next round: created %v (err %v), want one NodeClaim of the batch pool", claimPools(again), err)
	}
}

// The NodeClaims come back in the order the plan lists them, whatever
// order their creates finish in.
func TestCreatedClaimsComeBackInPlanOrder(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("web"))
	for i, cpu := range []string{"5", "6", "7"} { // one large node each, told apart by size
		e.cluster.UpdatePod(pendingPod(fmt.Sprintf("p%d", i), cpu))
	}
	plan, err := e.provisioner.Plan(ctx)
	if err != nil || len(plan.NodeClaims) != 3 {
		t.Fatalf("plan: %d NodeClaims, %v", len(plan.NodeClaims), err)
	}
	cpuOf := func(r corev1.ResourceList) string { q := r[corev1.ResourceCPU]; return q.String() }
	var want []string
	for _, nc := range plan.NodeClaims {
		want = append(want, cpuOf(nc.Requests))
	}
	// The plan's first claim is created last.
	var mu sync.Mutex
	others := make(chan struct{})
	done := 0
	e = intercepted(e, 20, func(ctx context.Context, c client.WithWatch, nc *karpv1.NodeClaim) error {
		if cpuOf(nc.Spec.Resources.Requests) == want[0] {
			select {
			case <-others:
			case <-time.After(gateTimeout):
				return errors.New("the other creates never finished")
			}
			return c.Create(ctx, nc)
		}
		err := c.Create(ctx, nc)
		mu.Lock()
		if done++; done == len(want)-1 {
			close(others)
		}
		mu.Unlock()
		return err
	})

	created, err := e.provisioner.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, nc := range created {
		got = append(got, cpuOf(nc.Spec.Resources.Requests))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("created claims sized %v, want the plan's order %v", got, want)
	}
}
