package state

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
)

// A nomination holds a pod's planned place so the next decision does not
// buy for it again. Once the planned node is up and kube-scheduler reports
// the pod unschedulable, the place did not work out (another pod took the
// room, or a spread kube-scheduler counts from bound pods only does not
// allow it): the nomination ends there, not when it lapses, so the pod is
// planned again in the next window. The report may come from an attempt
// that began just before the node was up; a wrong guess costs one solve,
// the pod being planned back onto the same node when it still fits, where
// waiting for the lapse costs the pod the nomination's whole TTL (measured
// live: a zone-spread pod rejected by its node 0.2 s after the node was up
// waited 20 s, because kube-scheduler does not write an unchanged report
// again).

// trackNode records whether node n can take pods (Ready, not cordoned, not
// deleting) and with which NoSchedule and NoExecute taints; c.mu is held.
func (c *Cluster) trackNode(name string, n *corev1.Node) {
	if n == nil || n.Spec.Unschedulable || n.DeletionTimestamp != nil || !isReady(n) {
		delete(c.up, name)
		return
	}
	c.up[name] = blocking(n.Spec.Taints)
}

// releaseRejected ends the nomination of pod k when update says
// kube-scheduler rejected it while its planned node is up with no taint the
// pod does not tolerate; c.mu is held.
func (c *Cluster) releaseRejected(k types.NamespacedName, old, update *corev1.Pod) {
	n, ok := c.nominated[k]
	if !ok || update.Spec.NodeName != "" || !newRejection(old, update) {
		return
	}
	node := n.target
	if nc, ok := c.nodeClaims[n.target]; ok {
		node = c.nodeOfClaim(nc.Status.NodeName, nc.Status.ProviderID)
	}
	taints, up := c.up[node]
	if node == "" || !up {
		return
	}
	if _, untolerated := schedcorev1.FindMatchingUntoleratedTaint(logr.Discard(), taints, update.Spec.Tolerations, nil, true); untolerated {
		return
	}
	delete(c.nominated, k)
}

// nodeOfClaim names a NodeClaim's node: the one it names, else the one
// with its provider ID; c.mu is held.
func (c *Cluster) nodeOfClaim(nodeName, providerID string) string {
	if nodeName != "" || providerID == "" {
		return nodeName
	}
	for name, n := range c.nodes {
		if n.Spec.ProviderID == providerID {
			return name
		}
	}
	return ""
}

// newRejection reports whether update carries a report of kube-scheduler
// that old did not: PodScheduled False, reason Unschedulable, with another
// message or time. kube-scheduler writes the condition after every failed
// attempt whose message changed (its node counts usually do).
func newRejection(old, update *corev1.Pod) bool {
	now := unschedulableCondition(update)
	if now == nil {
		return false
	}
	var was *corev1.PodCondition
	if old != nil {
		was = unschedulableCondition(old)
	}
	return was == nil || was.Message != now.Message || !was.LastTransitionTime.Equal(&now.LastTransitionTime) || !was.LastProbeTime.Equal(&now.LastProbeTime)
}

func unschedulableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// blocking are the taints that keep pods off a node.
func blocking(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
