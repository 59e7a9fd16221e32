package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Candidate is one managed node as disruption sees it.
type Candidate struct {
	NodeClaim *karpv1.NodeClaim
	// Node is nil while the NodeClaim has not registered.
	Node     *corev1.Node
	NodePool *karpv1.NodePool
	// Pods are the non-terminal pods bound to the node.
	Pods []*corev1.Pod
	// Nominated: a provisioning decision planned pods onto the node.
	Nominated bool
	// PDBs are the cluster's PodDisruptionBudgets (shared by every
	// candidate); nil: none.
	PDBs *PDBs
	// PoolStarting: the NodePool has NodeClaims still starting; it is
	// growing, and its nodes are not consolidated or replaced for drift
	// until they are up.
	PoolStarting bool
}

// Name is the NodeClaim's name.
func (c Candidate) Name() string { return c.NodeClaim.Name }

// Blocked says why the candidate may not be disrupted voluntarily now, or
// "" when it may: the node's own state, then its pods.
func Blocked(c Candidate, now time.Time) string {
	if why := blockedNode(c); why != "" {
		return why
	}
	return blockedPods(c, now)
}

// blockedNode: the NodeClaim or node is not in a state to go.
func blockedNode(c Candidate) string {
	nc := c.NodeClaim
	switch {
	case nc.DeletionTimestamp != nil:
		return "it is being deleted"
	case c.Node == nil:
		return "its node has not registered"
	case !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized):
		return "its node is not initialized"
	case c.Node.DeletionTimestamp != nil:
		return "its node is being deleted"
	case c.Node.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return fmt.Sprintf("node %s has %s", c.Node.Name, karpv1.AnnotationDoNotDisrupt)
	case nc.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return fmt.Sprintf("nodeclaim %s has %s", nc.Name, karpv1.AnnotationDoNotDisrupt)
	case c.Nominated:
		return "pods are nominated to it"
	}
	return ""
}

// blockedPods: a pod on the node may not be evicted now (do-not-disrupt, or
// a PodDisruptionBudget).
func blockedPods(c Candidate, now time.Time) string {
	for _, p := range c.Pods {
		// Any pod, DaemonSet and mirror pods included, may hold its node.
		if DoNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s/%s has %s=%s", p.Namespace, p.Name, karpv1.AnnotationDoNotDisrupt, p.Annotations[karpv1.AnnotationDoNotDisrupt])
		}
		if why := c.PDBs.Blocking(p); why != "" {
			return why
		}
	}
	return ""
}

// DoNotDisrupt reports whether the pod's karpenter.sh/do-not-disrupt
// annotation holds now: "true" always; a positive duration ("5m") for that
// long after the pod started (or until it has started); any other value
// is ignored.
func DoNotDisrupt(p *corev1.Pod, now time.Time) bool {
	v, ok := p.Annotations[karpv1.AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	return p.Status.StartTime == nil || now.Sub(p.Status.StartTime.Time) < d
}

// Empty reports whether only DaemonSet and mirror pods run on the node.
func Empty(c Candidate) bool {
	for _, p := range c.Pods {
		if !ownedByNodeOrDaemonSet(p) {
			return false
		}
	}
	return true
}

func ownedByNodeOrDaemonSet(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && (ref.Kind == "DaemonSet" || ref.Kind == "Node")
}

// Consolidatable reports whether consolidateAfter has passed since the
// NodeClaim's last pod event (or its initialization), with a message, and
// when it will be if not yet (0: never, or already).
func Consolidatable(nc *karpv1.NodeClaim, np *karpv1.NodePool, now time.Time) (ok bool, message string, wait time.Duration) {
	after := np.Spec.Disruption.ConsolidateAfter
	if after.Duration == nil {
		return false, "consolidateAfter is Never", 0
	}
	since := nc.Status.LastPodEventTime.Time
	if init := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); init != nil && init.Status == metav1.ConditionTrue && init.LastTransitionTime.After(since) {
		since = init.LastTransitionTime.Time
	}
	if since.IsZero() {
		since = nc.CreationTimestamp.Time
	}
	if left := since.Add(*after.Duration).Sub(now); left > 0 {
		return false, fmt.Sprintf("consolidateAfter (%s) has not elapsed since the last pod event", *after.Duration), left
	}
	return true, "", 0
}

// Expired reports whether the NodeClaim has outlived its expireAfter, and
// when it will if not yet (0: never, or already).
func Expired(nc *karpv1.NodeClaim, now time.Time) (bool, time.Duration) {
	if nc.Spec.ExpireAfter.Duration == nil || nc.DeletionTimestamp != nil {
		return false, 0
	}
	left := nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration).Sub(now)
	return left <= 0, max(left, 0)
}
