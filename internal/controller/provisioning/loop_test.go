package provisioning

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// runLoop serves the provisioning loop of e with windows of 1 s idle and
// 10 s max, until the test ends.
func runLoop(t *testing.T, e env) *Batcher {
	t.Helper()
	b := NewBatcher(e.clock, time.Second, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Loop(e.provisioner, b, e.clock, logr.Discard()).Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return b
}

// claimsInAPI waits until the API holds n NodeClaims and returns them; it
// fails the test if they do not come (or more do).
func claimsInAPI(t *testing.T, e env, n int) []karpv1.NodeClaim {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := &karpv1.NodeClaimList{}
		if err := e.kube.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > n {
			t.Fatalf("the API holds %d NodeClaims, want %d", len(list.Items), n)
		}
		if len(list.Items) == n {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API holds %d NodeClaims, want %d", len(list.Items), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A window takes every pod pending when it closes: pods that came while it
// was open (whether or not they triggered it) are decided together, in one
// round.
func TestAWindowTakesEveryPodPendingWhenItCloses(t *testing.T) {
	e := newEnv(t, kwokPool("web"))
	b := runLoop(t, e)
	e.cluster.UpdatePod(pendingPod("first", "1"))
	b.Trigger()
	e.clock.Step(500 * time.Millisecond)
	e.cluster.UpdatePod(pendingPod("second", "1"))
	b.Trigger()
	e.cluster.UpdatePod(pendingPod("quiet", "1")) // in the model, no trigger of its own
	e.clock.Step(time.Second)

	claims := claimsInAPI(t, e, 1)
	if cpu := claims[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "3" {
		t.Errorf("the window's NodeClaim asks for %s CPU, want the three pods' 3", cpu.String())
	}
	for _, p := range []string{"first", "second", "quiet"} {
		if got := e.cluster.NominationOf("default", p); got != claims[0].Name {
			t.Errorf("pod %s is nominated to %q, want %s", p, got, claims[0].Name)
		}
	}
}

// No round waits for the NodeClaims still launching: the next window
// decides while they launch, and pods with no room on them get new
// NodeClaims in that round.
func TestNoRoundWaitsForLaunchingClaims(t *testing.T) {
	e := newEnv(t, kwokPool("web"))
	b := runLoop(t, e)
	e.cluster.UpdatePod(pendingPod("first", "5"))
	b.Trigger()
	e.clock.Step(time.Second)
	first := claimsInAPI(t, e, 1)[0] // nothing launches it here: it stays launching

	for round, pod := range []string{"second", "third"} {
		e.cluster.UpdatePod(pendingPod(pod, "5")) // no room on the claims launching
		b.Trigger()
		e.clock.Step(time.Second)
		claims := claimsInAPI(t, e, round+2)
		if got := e.cluster.NominationOf("default", pod); got == "" || got == first.Name {
			t.Errorf("round %d: pod %s nominated to %q, want a NodeClaim of its own (of %d)", round+2, pod, got, len(claims))
		}
	}
}

// While a claim launches, pods that fit its room left go onto it and buy
// nothing, and those that do not get a new NodeClaim in the same round.
func TestPodsFitInFlightRoomOrBuyInTheSameRound(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, kwokPool("web"))
	e.cluster.UpdatePod(pendingPod("a", "1"))
	created, err := e.provisioner.Provision(ctx)
	if err != nil || len(created) != 1 {
		t.Fatalf("first round: %d NodeClaims, %v", len(created), err)
	}
	inFlight := created[0]
	launch(e, inFlight, "2") // launched as small, node not registered: 1 CPU of room left

	e.cluster.UpdatePod(pendingPod("fits", "500m"))
	e.cluster.UpdatePod(pendingPod("too-big", "1500m"))
	again, err := e.provisioner.Provision(ctx)
	if err != nil || len(again) != 1 {
		t.Fatalf("second round: %d NodeClaims (%v), want one, for the pod with no room", len(again), err)
	}
	if cpu := again[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.String() != "1500m" {
		t.Errorf("the new claim asks for %s CPU, want only the big pod's 1500m", cpu.String())
	}
	if got := e.cluster.NominationOf("default", "fits"); got != inFlight.Name {
		t.Errorf("the pod that fits is nominated to %q, want the claim in flight %s", got, inFlight.Name)
	}
	if got := e.cluster.NominationOf("default", "too-big"); got != again[0].Name {
		t.Errorf("the big pod is nominated to %q, want the new claim %s", got, again[0].Name)
	}
}

// A pod whose nomination lapses is planned again just after, not at the
// next resync: its planned place did not come through, and waiting for
// the resync would add up to ResyncInterval to its time pending.
func TestALapsedNominationIsPlannedAgainAtOnce(t *testing.T) {
	e := newEnv(t, kwokPool("web"))
	start := e.clock.Now()
	b := runLoop(t, e)
	for !e.clock.HasWaiters() { // the resync timer is armed: resyncs at 10 s, 20 s, 30 s
		time.Sleep(time.Millisecond)
	}
	e.clock.Step(3500 * time.Millisecond) // off the resyncs' beat
	e.cluster.UpdatePod(pendingPod("a", "1500m"))
	b.Trigger()
	e.clock.Step(time.Second)
	claimsInAPI(t, e, 1) // launched nowhere: a's nomination lapses after 20 s

	nominations := 0
	var again time.Time
	for e.clock.Since(start) < 4*ResyncInterval && again.IsZero() {
		e.clock.Step(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond) // let the loop's goroutines run
		for _, ev := range events(e.recorder) {
			if strings.Contains(ev, ReasonNominated) {
				if nominations++; nominations == 2 {
					again = e.clock.Now()
				}
			}
		}
	}
	if again.IsZero() {
		t.Fatalf("pod a was not planned again within %s", 4*ResyncInterval)
	}
	// Nominated at 4.5 s for 20 s; the window opened just after 24.5 s
	// closes after 1 s idle; the resync would have waited until 30 s.
	if at := again.Sub(start); at >= 28*time.Second {
		t.Errorf("pod a planned again at %s, want just after its nomination lapsed at 24.5s", at)
	}
}

// A pod kube-scheduler has not looked at is decided for just after its
// grace, though it arrived while the loop was waiting and nothing
// triggered it: not at the next resync.
func TestABacklogPodIsDecidedForAfterItsGrace(t *testing.T) {
	e := newEnv(t, kwokPool("web"))
	start := e.clock.Now()
	runLoop(t, e)
	for !e.clock.HasWaiters() { // the loop waits
		time.Sleep(time.Millisecond)
	}
	e.clock.Step(500 * time.Millisecond)
	p := pendingPod("a", "1500m")
	p.Status.Conditions = nil // kube-scheduler has not looked at it
	p.CreationTimestamp = metav1.NewTime(e.clock.Now())
	e.cluster.UpdatePod(p) // not provisionable yet: the feed triggers nothing

	var at time.Duration
	for e.clock.Since(start) < 15*time.Second && at == 0 {
		e.clock.Step(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
		for _, ev := range events(e.recorder) {
			if strings.Contains(ev, ReasonNominated) {
				at = e.clock.Since(start)
			}
		}
	}
	if at == 0 {
		t.Fatal("the pod was never decided for")
	}
	// The grace ends at 2.5 s; then a look within a second and the 1 s
	// window: about 3.5 to 4.5 s, far from the 10 s resync.
	if at > 5*time.Second {
		t.Errorf("decided for at %s, want just after its grace ended at %s", at, 500*time.Millisecond+state.SchedulerBacklogGrace)
	}
}
