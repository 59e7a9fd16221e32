package nomination

import corev1 "k8s.io/api/core/v1"

// wantsHint reports whether a pod planned onto node should be handed to
// kube-scheduler with that nomination now: still unbound, not nominated
// elsewhere (preemption wins), and alive.
//
// Pods with topology spread constraints are hinted too, though
// kube-scheduler's spread filter counts the pods nominated to the node it
// evaluates (and only bound pods elsewhere), so a node holding several
// nominated pods of one spread looks skewed until the other domains' pods
// bind, and hinted spread pods are rejected more often (9 to 15 of the
// 30-pod integration test's pods, against 4 to 7). Measured, the held room
// is worth more: 23 of 24 runs of that test bound every pod on the planned
// nodes with hints, 3 of 5 without.
func wantsHint(p *corev1.Pod, node string) bool {
	return p.Spec.NodeName == "" && p.Status.NominatedNodeName == "" &&
		p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// staleHint reports whether a pod still waits on a node that is going away.
func staleHint(p *corev1.Pod, node string) bool {
	return node != "" && p.Spec.NodeName == "" && p.Status.NominatedNodeName == node
}
