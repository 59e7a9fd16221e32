package sched

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Plan is the solver's decision.
type Plan struct {
	// NodeClaims to create.
	NodeClaims []NodeClaim
	// Existing lists pods placed on existing nodes and in-flight claims.
	Existing []Placement
	// Unschedulable lists pods no node can take, with the reason.
	Unschedulable []Unschedulable
}

// NodeClaim is a node to buy.
type NodeClaim struct {
	NodePool string
	// Requirements to write on the NodeClaim: the pool's and the pods', the
	// instance-type options and their capacity types.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// InstanceTypeOptions are the types that fit every pod, cheapest first.
	InstanceTypeOptions []string
	// The offering a launch would pick: the cheapest compatible available one.
	InstanceType string
	Zone         string
	CapacityType string
	Price        float64
	// MinValuesRelaxed: under the BestEffort policy, the options span fewer
	// values than a minValues asked for (Karpenter's
	// karpenter.sh/nodeclaim-min-values-relaxed annotation).
	MinValuesRelaxed bool
	// Pods the claim was sized for, and their requests plus daemon overhead.
	Pods     []*corev1.Pod
	Requests corev1.ResourceList
}

// Placement is a set of pods placed on an existing node or in-flight claim.
type Placement struct {
	Node string
	Pods []*corev1.Pod
}

// Unschedulable is a pod with no place and why.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// TotalPrice is the hourly price of the plan's new NodeClaims.
func (p Plan) TotalPrice() float64 {
	total := 0.0
	for _, nc := range p.NodeClaims {
		total += nc.Price
	}
	return total
}
