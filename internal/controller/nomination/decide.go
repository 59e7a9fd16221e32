package nomination

import corev1 "k8s.io/api/core/v1"

// wantsHint reports whether a pod planned onto node should be handed to
// kube-scheduler with that nomination now: still unbound, not nominated
// elsewhere (preemption wins), and alive.
func wantsHint(p *corev1.Pod, node string) bool {
	return p.Spec.NodeName == "" && p.Status.NominatedNodeName == "" &&
		p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// staleHint reports whether a pod still waits on a node that is going away.
func staleHint(p *corev1.Pod, node string) bool {
	return node != "" && p.Spec.NodeName == "" && p.Status.NominatedNodeName == node
}
