package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func benchPod(uid string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
}

// The observer times the phases from what it sees: when the last pod
// appeared and when the last one turned Running; a deleted pod no longer
// counts.
func TestObserverTimesPodsFromTheirTransitions(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	o := newObserver(clk)

	o.pod(benchPod("a", corev1.PodPending), false)
	clk.Step(2 * time.Second)
	podB := benchPod("b", corev1.PodPending)
	podB.Labels = map[string]string{appLabel: deployB}
	o.pod(podB, false)
	clk.Step(3 * time.Second)
	boundA := benchPod("a", corev1.PodPending)
	boundA.Spec.NodeName = "n1"
	o.pod(boundA, false)
	clk.Step(time.Second)
	runningA := benchPod("a", corev1.PodRunning)
	runningA.Spec.NodeName = "n1"
	o.pod(runningA, false)
	clk.Step(time.Second)
	o.pod(benchPod("b", corev1.PodRunning), false)
	clk.Step(4 * time.Second)
	o.pod(benchPod("b", corev1.PodRunning), false) // a status update: not a new transition

	s := o.pods()
	if s.created != 2 || s.live != 2 || s.running != 2 || s.spreadRunning != 1 {
		t.Errorf("created %d live %d running %d (spread %d), want 2 2 2 (1)", s.created, s.live, s.running, s.spreadRunning)
	}
	if got := s.lastCreated.Sub(start); got != 2*time.Second {
		t.Errorf("last created at %s, want 2s", got)
	}
	if got := s.lastRunning.Sub(start); got != 7*time.Second {
		t.Errorf("last Running at %s, want 7s", got)
	}
	if got := s.lastBound.Sub(start); s.bound != 1 || got != 5*time.Second {
		t.Errorf("%d bound, last at %s; want 1 at 5s", s.bound, got)
	}

	deleting := benchPod("a", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	o.pod(deleting, false)
	o.pod(cache.DeletedFinalStateUnknown{Obj: benchPod("b", corev1.PodRunning)}, true)
	if s := o.pods(); s.live != 0 || s.running != 0 || s.bound != 0 || s.created != 2 {
		t.Errorf("after deletions: live %d running %d bound %d created %d", s.live, s.running, s.bound, s.created)
	}
}

// Node changes are additions and removals only (status updates are not);
// nodes being deleted or tainted for disruption count as draining; cost
// sums the catalog's prices.
func TestObserverTracksNodeChangesAndCost(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	o := newObserver(clk)
	book := newPriceBook(kwokCatalog())
	node := func(name, it, ct string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelInstanceTypeStable: it, karpv1.LabelCapacityType: ct, corev1.LabelTopologyZone: "test-zone-b"}}}
	}
	o.node(node("n1", "c-8x-amd64-linux", "spot"), false)
	clk.Step(5 * time.Second)
	o.node(node("n2", "c-4x-amd64-linux", "on-demand"), false)
	clk.Step(5 * time.Second)
	o.node(node("n1", "c-8x-amd64-linux", "spot"), false) // heartbeat
	s := o.nodeSnapshot(book)
	if s.count != 2 || s.launched != 2 || s.lastChange.Sub(start) != 5*time.Second || s.draining != 0 {
		t.Errorf("snapshot %+v", s)
	}
	if want := 0.1512 + 0.108; s.cost < want-1e-9 || s.cost > want+1e-9 {
		t.Errorf("cost %v, want %v", s.cost, want)
	}

	tainted := node("n1", "c-8x-amd64-linux", "spot")
	tainted.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
	o.node(tainted, false)
	if s := o.nodeSnapshot(book); s.draining != 1 || s.lastChange.Sub(start) != 5*time.Second {
		t.Errorf("tainted: %+v", s)
	}
	clk.Step(5 * time.Second)
	o.node(tainted, true)
	o.node(node("x", "no-such-type", "spot"), false)
	s = o.nodeSnapshot(book)
	if s.count != 2 || s.launched != 3 || s.draining != 0 || s.lastChange.Sub(start) != 15*time.Second || len(s.unpriced) != 1 {
		t.Errorf("after a deletion and an unknown type: %+v", s)
	}
}
