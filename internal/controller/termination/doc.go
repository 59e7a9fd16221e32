// Package termination owns taking nodes away safely. A deleting NodeClaim
// gets its termination deadline (deletion time plus the NodeClaim's
// terminationGracePeriod), its Node is deleted and waited for, the instance
// is deleted through the provider until it is gone, and the finalizer is
// removed. A deleting Node is tainted karpenter.sh/disrupted:NoSchedule and
// drained through the Eviction API, so PodDisruptionBudgets hold: in tiers
// (non-critical pods, then non-critical DaemonSet pods, then critical pods,
// then critical DaemonSet pods), waiting on karpenter.sh/do-not-disrupt pods
// instead of evicting them, and deleting pods outright only once the
// deadline leaves them no time to terminate gracefully. Then it waits for
// the node's VolumeAttachments to go (all but those of pods the drain leaves
// behind; never past the deadline), the instance is deleted and the Node's
// finalizer removed. The drain plan and the attachments still pending are
// pure functions of the pods, the attachments, the time and the deadline.
// Taint and finalizer lists are written under an optimistic lock
// (PatchLocked: a merge patch that holds only at the resourceVersion read,
// read again and retried on a conflict), so a change another actor makes
// meanwhile is never overwritten.
package termination
