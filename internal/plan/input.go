package plan

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	taken := map[string]bool{}
	for _, pods := range set.BoundPods() {
		for _, p := range pods {
			taken[p.Namespace+"/"+p.Name] = true
			cluster.UpdatePod(p)
		}
	}
	for _, p := range set.PendingPods() {
		p = unschedulable(uniquelyNamed(p, taken))
		if ok, why := pendingForNodewright(cluster, p); !ok {
			warnings = append(warnings, fmt.Sprintf("pod %s/%s is not provisioned for: %s", p.Namespace, p.Name, why))
		}
		cluster.UpdatePod(p)
	}
	for _, np := range set.NodePools {
		if w := missingNodeClass(set, np); w != "" {
			warnings = append(warnings, w)
		}
		np = readyUnlessSaid(np)
		if ok, why := state.Launchable(np); !ok {
			warnings = append(warnings, fmt.Sprintf("NodePool %s is not launched from: %s", np.Name, why))
		}
		cluster.UpdateNodePool(np)
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
		if nc.Labels[karpv1.LabelNodePool] == "" {
			warnings = append(warnings, fmt.Sprintf("NodeClaim %s has no %s label: no NodePool owns it, it is not counted", nc.Name, karpv1.LabelNodePool))
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

// uniquelyNamed renames a pod whose namespace/name another pod of the
// manifests already has (workloads of different kinds with one name expand
// to the same <name>-<i>): the kind of its owner is added to the name.
func uniquelyNamed(p *corev1.Pod, taken map[string]bool) *corev1.Pod {
	name := p.Name
	if taken[p.Namespace+"/"+name] {
		kind := "pod"
		if ref := metav1.GetControllerOf(p); ref != nil {
			kind = strings.ToLower(ref.Kind)
		}
		name = p.Name + "-" + kind
		for i := 2; taken[p.Namespace+"/"+name]; i++ {
			name = fmt.Sprintf("%s-%s%d", p.Name, kind, i)
		}
		p = p.DeepCopy()
		p.Name, p.UID = name, types.UID(p.Namespace+"/"+name)
	}
	taken[p.Namespace+"/"+name] = true
	return p
}

// pendingForNodewright says why a pod without a node is not provisioned
// for, as the controller decides it (state.Cluster.Provisionable).
func pendingForNodewright(c *state.Cluster, p *corev1.Pod) (bool, string) {
	if c.Provisionable(p) {
		return true, ""
	}
	switch {
	case len(p.Spec.SchedulingGates) > 0:
		return false, "it has scheduling gates"
	case p.Status.NominatedNodeName != "":
		return false, fmt.Sprintf("kube-scheduler nominated it to node %s (status.nominatedNodeName)", p.Status.NominatedNodeName)
	case p.DeletionTimestamp != nil:
		return false, "it is being deleted"
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return false, fmt.Sprintf("it has finished (%s)", p.Status.Phase)
	case slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" || o.Kind == "Node" }):
		return false, "a DaemonSet or its node runs it"
	}
	return false, "its PodScheduled condition does not say kube-scheduler found no node (Unschedulable)"
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
