package state

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// A pending pod kube-scheduler has not looked at is provisionable once the
// grace has passed since its creation, unless kube-scheduler is not the
// one to look at it.
func TestAPodKubeSchedulerHasNotReachedIsProvisionableAfterTheGrace(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   bool // provisionable after the grace
	}{
		{"not looked at", func(*corev1.Pod) {}, true},
		{"phase not set yet", func(p *corev1.Pod) { p.Status.Phase = "" }, true},
		{"held by scheduling gates", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}, false},
		{"another scheduler's", func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }, false},
		{"kube-scheduler's by name", func(p *corev1.Pod) { p.Spec.SchedulerName = corev1.DefaultSchedulerName }, true},
		{"looked at and found a place", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}, false},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n" }, false},
		{"finished", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(epoch)
			c := NewCluster(clk)
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", CreationTimestamp: metav1.NewTime(epoch)},
				Status: corev1.PodStatus{Phase: corev1.PodPending}}
			tc.mutate(p)
			c.UpdatePod(p)
			if c.Provisionable(p) {
				t.Fatal("provisionable at once: kube-scheduler gets its grace first")
			}
			at, ok := c.NextProvisionable()
			if ok != tc.want || ok && !at.Equal(epoch.Add(SchedulerBacklogGrace)) {
				t.Errorf("next provisionable %s, %v; want the grace's end: %v", at, ok, tc.want)
			}
			clk.Step(SchedulerBacklogGrace)
			if got := c.Provisionable(p); got != tc.want {
				t.Errorf("provisionable after the grace: %v, want %v", got, tc.want)
			}
			if got := len(c.Snapshot().Pending) == 1; got != tc.want {
				t.Errorf("pending in the snapshot: %v, want %v", got, tc.want)
			}
		})
	}
}
