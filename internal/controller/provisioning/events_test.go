package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// A pod is told the same event once per EventDedupe; another message, or
// the same after the window, is told.
func TestPodEventsAreDeduplicated(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	rec := record.NewFakeRecorder(100)
	e := newPodEvents(rec, clk)
	a, b := pendingPod("a", "1"), pendingPod("b", "1")
	steps := []struct {
		pod     *corev1.Pod
		after   time.Duration
		message string
		told    bool
	}{
		{a, 0, "nodeclaim/web-1", true},
		{a, 30 * time.Second, "nodeclaim/web-1", false}, // the same, within the window
		{b, 0, "nodeclaim/web-1", true},                 // another pod
		{a, 0, "nodeclaim/web-2", true},                 // another place
		{a, 0, "nodeclaim/web-1", true},                 // back: not the last told
		{a, EventDedupe - time.Second, "nodeclaim/web-1", false},
		{a, time.Second, "nodeclaim/web-1", true}, // the window passed
	}
	for i, s := range steps {
		clk.Step(s.after)
		e.Eventf(s.pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: %s", s.message)
		got := len(events(rec)) == 1
		if got != s.told {
			t.Errorf("step %d (%s, %s): told %v, want %v", i, s.pod.Name, s.message, got, s.told)
		}
	}
}
