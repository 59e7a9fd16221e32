package state

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SchedulerBacklogGrace is how long after its creation a pending pod
// kube-scheduler has not looked at yet counts as provisionable anyway.
//
// Karpenter provisions only for pods kube-scheduler marked Unschedulable.
// kube-scheduler attempts a new pod within milliseconds while it keeps up;
// when thousands are pending and nodes keep arriving, it spends its time
// retrying the pods it failed before (each node added requeues them, and
// they are older than the new ones), so new pods wait minutes for a first
// attempt, and each provisioning window sees only the few it reached:
// measured live at 10,000 + 2,000 pods on 2 cores, windows bought about 4
// nodes each, every 10 to 30 s. A pod still unattempted after the grace is
// decided for with the others: the solver places it on the room existing
// and launching nodes have before it buys, so a pod kube-scheduler would
// have placed costs nothing.
const SchedulerBacklogGrace = 2 * time.Second

// SchedulerBehind reports whether kube-scheduler has not looked at a
// pending pod within SchedulerBacklogGrace of its creation: no PodScheduled
// condition, no scheduling gates, and the default scheduler's (another
// scheduler's backlog is not kube-scheduler's). The caller checks that it
// is unbound and alive.
func SchedulerBehind(p *corev1.Pod, now time.Time) bool {
	at, ok := schedulerBehindAt(p)
	return ok && !now.Before(at)
}

// schedulerBehindAt is when a pod not looked at by kube-scheduler counts
// as behind; false for a pod it has looked at, or that it does not
// schedule.
func schedulerBehindAt(p *corev1.Pod) (time.Time, bool) {
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending && p.Status.Phase != "" || len(p.Spec.SchedulingGates) > 0 ||
		p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName || p.CreationTimestamp.IsZero() {
		return time.Time{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return time.Time{}, false
		}
	}
	return p.CreationTimestamp.Add(SchedulerBacklogGrace), true
}
