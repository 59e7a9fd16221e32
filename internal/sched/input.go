package sched

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Input is everything one solve looks at. It is read, never modified.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the existing nodes, and in-flight NodeClaims from earlier
	// batches (InFlight), that pods may be placed on before anything new is
	// bought.
	Nodes []Node
	// NodePools with the instance types each may launch.
	NodePools []NodePool
	// DaemonSetPods are one pod per DaemonSet (its template); each new node
	// reserves room for the ones that would run on it.
	DaemonSetPods []*corev1.Pod
	// WellKnownLabels are keys a provider defines on every node, so a pod may
	// ask for them even when a NodePool does not mention them. Nil means
	// WellKnownLabels().
	WellKnownLabels map[string]bool
	// Unavailable reports offerings known to be out of capacity; nil means
	// none.
	Unavailable func(instanceType, zone, capacityType string) bool
	// MinValuesPolicy is Strict (the default: a claim whose fitting types
	// span fewer values than a requirement's minValues is not made) or
	// BestEffort (the claim is made with what there is, and marked relaxed).
	MinValuesPolicy MinValuesPolicy
	// Namespaces maps namespace names to their labels, for the
	// namespaceSelector of pod (anti-)affinity terms.
	Namespaces map[string]map[string]string
	// PersistentVolumeClaims, PersistentVolumes and StorageClasses resolve
	// the pods' volumes to where they can be used: a bound claim's volume
	// node affinity, or an unbound claim's StorageClass allowedTopologies.
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// RequestsOf, when set, gives a pod's effective requests; callers that
	// solve many times over the same pods (disruption) pass a memo. Nil
	// computes them (component-helpers' PodRequests).
	RequestsOf func(*corev1.Pod) corev1.ResourceList
}

// Node is capacity that exists already: a registered node or an in-flight
// NodeClaim.
type Node struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	// Pods already bound to (or nominated for) the node; their requests are
	// taken from Allocatable.
	Pods []*corev1.Pod
	// NodePool is the pool that launched the node, "" for unmanaged nodes.
	NodePool string
	// Initialized is false for a managed node still starting: its startup
	// taints and the known ephemeral taints (not-ready, unreachable,
	// uninitialized, unregistered) do not keep pods away.
	Initialized bool
	// StartupTaints of the node's NodeClaim.
	StartupTaints []corev1.Taint
	// InFlight marks a NodeClaim that has not registered a node yet; such
	// capacity is tried after registered nodes.
	InFlight bool
	// MarkedForDeletion nodes take no new pods.
	MarkedForDeletion bool
	// Requirements are set for a NodeClaim not launched yet (with InFlight):
	// its spec.requirements, what its node may turn out to be. A pod goes
	// onto it when its node affinity is compatible with them (a key the
	// claim leaves open, such as a zone, is no mismatch), and each pod
	// placed narrows them for the next: pods needing different zones do not
	// share it. Its Allocatable is what the claim asked for, which includes
	// the DaemonSet pods that will run on it; their share stays theirs. A
	// Session moves no pods onto it.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
}

// NodePool is a NodePool with the instance types it may launch.
type NodePool struct {
	*karpv1.NodePool
	InstanceTypes []*catalog.InstanceType
	// Usage is the capacity of the pool's existing nodes and in-flight claims,
	// counted against spec.limits (including a "nodes" count).
	Usage corev1.ResourceList
}

// MinValuesPolicy says what to do when instance types cannot meet minValues.
type MinValuesPolicy string

const (
	MinValuesStrict     MinValuesPolicy = "Strict"
	MinValuesBestEffort MinValuesPolicy = "BestEffort"
)

// AddNode adds one node's capacity, and a count of one under "nodes", to a
// pool's usage (the form NodePool.Usage takes) and returns it.
func AddNode(usage, capacity corev1.ResourceList) corev1.ResourceList {
	if usage == nil {
		usage = corev1.ResourceList{}
	}
	for name, q := range capacity {
		cur := usage[name]
		cur.Add(q)
		usage[name] = cur
	}
	nodes := usage["nodes"]
	nodes.Add(*resource.NewQuantity(1, resource.DecimalSI))
	usage["nodes"] = nodes
	return usage
}

// InFlightLabels are the labels a NodeClaim's node will carry: its
// single-valued In requirements, overridden by its own labels.
func InFlightLabels(nc *karpv1.NodeClaim) map[string]string {
	labels := map[string]string{}
	for _, r := range nc.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	return labels
}
