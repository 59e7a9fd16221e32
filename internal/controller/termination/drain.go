package termination

import (
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
)

// stuckTerminating: a pod past its deletion this long is not waited on.
const stuckTerminating = time.Minute

// Drain is what to do to a node's pods now.
type Drain struct {
	// Evict: the current tier's pods that may be evicted (PDBs decide).
	Evict []*corev1.Pod
	// Delete: pods the deadline forces out, with the grace they still get.
	Delete []ForcedDeletion
	// Waiting: pods still to leave, evicted or not (do-not-disrupt pods,
	// later tiers, pods terminating).
	Waiting int
}

// ForcedDeletion is a pod deleted regardless of PDBs and do-not-disrupt.
type ForcedDeletion struct {
	Pod   *corev1.Pod
	Grace time.Duration
}

// Drained reports whether no pod is left to wait for.
func (d Drain) Drained() bool { return d.Waiting == 0 && len(d.Evict) == 0 && len(d.Delete) == 0 }

// PlanDrain decides the drain step for a node's pods at now, with an
// optional deadline (the NodeClaim's termination timestamp).
func PlanDrain(pods []*corev1.Pod, now time.Time, deadline *time.Time) Drain {
	var d Drain
	remaining := 0 // pods that must leave and are not forced out now
	tiers := make([][]*corev1.Pod, 4)
	for _, p := range pods {
		if !mustLeave(p, now) {
			continue
		}
		if deadline != nil && !now.Before(deadline.Add(-podGrace(p))) {
			d.Delete = append(d.Delete, ForcedDeletion{Pod: p, Grace: max(deadline.Sub(now), time.Second)})
			continue
		}
		remaining++
		if p.DeletionTimestamp != nil {
			continue // already leaving
		}
		tier := 0
		if isCritical(p) {
			tier = 2
		}
		if ownedByDaemonSet(p) {
			tier++
		}
		tiers[tier] = append(tiers[tier], p)
	}
	for _, tier := range tiers {
		if len(tier) == 0 {
			continue
		}
		for _, p := range tier {
			if !disruption.DoNotDisrupt(p, now) {
				d.Evict = append(d.Evict, p) // do-not-disrupt pods are waited on, never evicted
			}
		}
		break // only the first non-empty tier moves
	}
	d.Waiting = remaining - len(d.Evict)
	return d
}

// mustLeave: pods that hold the node: not finished, not mirror pods, not
// tolerating the disrupted taint, not stuck terminating.
func mustLeave(p *corev1.Pod, now time.Time) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Node" }) {
		return false
	}
	if p.DeletionTimestamp != nil && now.Sub(p.DeletionTimestamp.Time) > stuckTerminating {
		return false
	}
	return !schedcorev1.TolerationsTolerateTaint(logr.Discard(), p.Spec.Tolerations, &karpv1.DisruptedNoScheduleTaint, true)
}

func podGrace(p *corev1.Pod) time.Duration {
	if p.Spec.TerminationGracePeriodSeconds == nil {
		return 30 * time.Second
	}
	return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
}

func isCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}
