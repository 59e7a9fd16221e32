package garbagecollection

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// MinInstanceAge protects freshly launched instances: the NodeClaim that
// records their provider ID may not have been written (or seen) yet.
const MinInstanceAge = 30 * time.Second

// Decision is what a round of garbage collection removes.
type Decision struct {
	// Instances to terminate: no NodeClaim owns them.
	Instances []*karpv1.NodeClaim
	// NodeClaims to delete: their instance is gone.
	NodeClaims []*karpv1.NodeClaim
}

// Decide compares the provider's instances (as the provider's List returns
// them: named after the NodeClaim they were launched for) with the
// cluster's NodeClaims and Nodes at time now. minAge is the age below which
// an unowned instance is left alone.
func Decide(instances []*karpv1.NodeClaim, claims []*karpv1.NodeClaim, nodes []*corev1.Node, now time.Time, minAge time.Duration) Decision {
	claimByProviderID := map[string]*karpv1.NodeClaim{}
	unlaunched := map[string]bool{} // claims that may still record an instance
	for _, nc := range claims {
		if nc.Status.ProviderID != "" {
			claimByProviderID[nc.Status.ProviderID] = nc
		} else {
			unlaunched[nc.Name] = true
		}
	}
	instanceIDs := map[string]bool{}
	var d Decision
	for _, in := range instances {
		instanceIDs[in.Status.ProviderID] = true
		if in.DeletionTimestamp != nil {
			continue // already terminating
		}
		if _, owned := claimByProviderID[in.Status.ProviderID]; owned || unlaunched[in.Name] {
			continue
		}
		if now.Sub(in.CreationTimestamp.Time) < minAge {
			continue
		}
		d.Instances = append(d.Instances, in)
	}
	readyNode := map[string]bool{}
	for _, n := range nodes {
		if n.Spec.ProviderID != "" && nodeReady(n) {
			readyNode[n.Spec.ProviderID] = true
		}
	}
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil || nc.Status.ProviderID == "" || instanceIDs[nc.Status.ProviderID] {
			continue
		}
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) || readyNode[nc.Status.ProviderID] {
			continue // liveness handles unregistered claims; a Ready node proves the instance lives
		}
		d.NodeClaims = append(d.NodeClaims, nc)
	}
	return d
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
