package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Input builds the solver input the way the controller does: the manifests
// are fed to the same cluster model (internal/state) the controller's
// informers feed, and the decision's pods, nodes, in-flight NodeClaims and
// pools come from its snapshot. What the manifests cannot say is assumed
// as a user applying them expects:
//
//   - a pod without a node is pending and kube-scheduler found no place for
//     it (PodScheduled False, Unschedulable), unless it carries scheduling
//     gates or a PodScheduled condition of its own;
//   - a NodePool without a Ready condition is Ready (a NodePool written
//     with Ready False, being deleted or static is not launched from);
//   - every NodePool may launch every catalog type.
//
// It also returns warnings a user should see (for example a NodePool whose
// NodeClass is not in the manifests).
func Input(set *manifest.Set, types []catalog.InstanceType) (sched.Input, []string) {
	var warnings []string
	its := make([]*catalog.InstanceType, len(types))
	for i := range types {
		its[i] = &types[i]
	}
	cluster := state.NewCluster(clock.RealClock{})
	for _, n := range set.Nodes {
		cluster.UpdateNode(n)
	}
	for _, nc := range set.NodeClaims {
		cluster.UpdateNodeClaim(nc)
	}
	for _, p := range set.PendingPods() {
		cluster.UpdatePod(unschedulable(p))
	}
	for _, pods := range set.BoundPods() {
		for _, p := range pods {
			cluster.UpdatePod(p)
		}
	}
	for _, np := range set.NodePools {
		if w := missingNodeClass(set, np); w != "" {
			warnings = append(warnings, w)
		}
		if ok, why := state.Launchable(readyUnlessSaid(np)); !ok {
			warnings = append(warnings, fmt.Sprintf("NodePool %s is not launched from: %s", np.Name, why))
		}
		cluster.UpdateNodePool(readyUnlessSaid(np))
	}
	for _, ds := range set.DaemonSets {
		cluster.UpdateDaemonSet(ds)
	}
	for _, ns := range set.Namespaces {
		cluster.UpdateNamespace(ns)
	}
	for _, pvc := range set.AllPersistentVolumeClaims() {
		cluster.UpdatePersistentVolumeClaim(pvc)
	}
	for _, pv := range set.PersistentVolumes {
		cluster.UpdatePersistentVolume(pv)
	}
	for _, sc := range set.StorageClasses {
		cluster.UpdateStorageClass(sc)
	}
	cluster.MarkSynced()

	snap := cluster.Snapshot()
	for _, nc := range set.NodeClaims {
		if nc.Status.NodeName == "" && nc.Status.ProviderID == "" && len(nc.Status.Allocatable) == 0 && nc.DeletionTimestamp == nil {
			warnings = append(warnings, fmt.Sprintf("NodeClaim %s is not launched yet (no status.providerID or status.allocatable): it counts as the room it requests (spec.resources.requests)", nc.Name))
		}
	}
	pools, _, _ := snap.Pools(func(*karpv1.NodePool) ([]*catalog.InstanceType, bool, error) { return its, true, nil })
	return snap.ProvisioningInput(pools), warnings
}

// unschedulable marks a pending pod as kube-scheduler leaves one it found
// no node for, unless it is gated or already says how scheduling went.
func unschedulable(p *corev1.Pod) *corev1.Pod {
	if len(p.Spec.SchedulingGates) > 0 || slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }) {
		return p
	}
	p = p.DeepCopy()
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	})
	return p
}

// readyUnlessSaid returns the NodePool with a Ready condition when it has
// none: manifests as written carry no status.
func readyUnlessSaid(np *karpv1.NodePool) *karpv1.NodePool {
	if meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady) != nil {
		return np
	}
	np = np.DeepCopy()
	meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Assumed"})
	return np
}

func missingNodeClass(set *manifest.Set, np *karpv1.NodePool) string {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return fmt.Sprintf("NodePool %s has no nodeClassRef", np.Name)
	}
	var names []string
	switch ref.Group + "/" + ref.Kind {
	case awsv1.Group + "/EC2NodeClass":
		for _, nc := range set.EC2NodeClasses {
			names = append(names, nc.Name)
		}
	case kwokv1alpha1.Group + "/KWOKNodeClass":
		for _, nc := range set.KWOKNodeClasses {
			names = append(names, nc.Name)
		}
	default:
		return fmt.Sprintf("NodePool %s references %s %s of group %s, which Nodewright does not know", np.Name, ref.Kind, ref.Name, ref.Group)
	}
	if slices.Contains(names, ref.Name) {
		return ""
	}
	return fmt.Sprintf("NodePool %s references %s %s, which is not in the manifests; planning as if it were ready", np.Name, ref.Kind, ref.Name)
}
