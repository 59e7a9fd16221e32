package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Input builds the solver input: every NodePool may launch every catalog type;
// Nodes are existing capacity (with the pods bound to them), NodeClaims not yet
// backed by a Node are in-flight capacity. It also returns warnings a user
// should see (for example a NodePool whose NodeClass is not in the manifests).
func Input(set *manifest.Set, types []catalog.InstanceType) (sched.Input, []string) {
	var warnings []string
	its := make([]*catalog.InstanceType, len(types))
	for i := range types {
		its[i] = &types[i]
	}
	in := sched.Input{
		Pods: set.PendingPods(), DaemonSetPods: set.DaemonSetPods(), Namespaces: set.NamespaceLabels(),
		PersistentVolumeClaims: set.AllPersistentVolumeClaims(), PersistentVolumes: set.PersistentVolumes, StorageClasses: set.StorageClasses,
	}
	bound := set.BoundPods()
	usage := map[string]corev1.ResourceList{}
	for _, n := range set.Nodes {
		pool := n.Labels[karpv1.LabelNodePool]
		allocatable := n.Status.Allocatable
		if len(allocatable) == 0 {
			allocatable = n.Status.Capacity
		}
		in.Nodes = append(in.Nodes, sched.Node{
			Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: allocatable,
			Pods: bound[n.Name], NodePool: pool, Initialized: true, MarkedForDeletion: n.Spec.Unschedulable,
		})
		if pool != "" {
			usage[pool] = sched.AddNode(usage[pool], n.Status.Capacity)
		}
	}
	for _, nc := range set.NodeClaims {
		if nc.Status.NodeName != "" {
			continue // its Node stands for it
		}
		pool := nc.Labels[karpv1.LabelNodePool]
		if len(nc.Status.Allocatable) == 0 {
			warnings = append(warnings, fmt.Sprintf("NodeClaim %s has no status.allocatable; it is not counted as capacity", nc.Name))
			continue
		}
		in.Nodes = append(in.Nodes, sched.Node{
			Name: nc.Name, Labels: sched.InFlightLabels(nc), Taints: nc.Spec.Taints, Allocatable: nc.Status.Allocatable,
			NodePool: pool, StartupTaints: nc.Spec.StartupTaints, InFlight: true,
		})
		if pool != "" {
			usage[pool] = sched.AddNode(usage[pool], nc.Status.Capacity)
		}
	}
	for _, np := range set.NodePools {
		if w := missingNodeClass(set, np); w != "" {
			warnings = append(warnings, w)
		}
		in.NodePools = append(in.NodePools, sched.NodePool{NodePool: np, InstanceTypes: its, Usage: usage[np.Name]})
	}
	return in, warnings
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
