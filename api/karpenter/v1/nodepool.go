package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is the set of rules a platform team writes for the nodes Nodewright
// may create: which instance types, zones and capacity types, which labels and
// taints the nodes carry, how many resources the pool may hold, and when its
// nodes may be disrupted.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description="The NodeClass the pool's nodes use"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes",description="Nodes the pool holds"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is what a NodePool asks for.
//
// +kubebuilder:validation:XValidation:message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",rule="has(self.replicas) == has(oldSelf.replicas)"
// +kubebuilder:validation:XValidation:message="only 'limits.nodes' is supported on static NodePools",rule="!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')"
// +kubebuilder:validation:XValidation:message="'weight' cannot be set on static NodePools",rule="!has(self.replicas) || !has(self.weight)"
type NodePoolSpec struct {
	// Template describes the NodeClaims this pool launches.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when and how fast the pool's nodes may be removed or
	// replaced.
	// +kubebuilder:default={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits caps the total capacity of the pool's nodes (cpu, memory, nodes, or
	// any other resource). Unset means unlimited.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools: higher weights are tried first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the pool static: it keeps exactly this many nodes and never
	// consolidates them.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Limits caps the resources a NodePool may hold.
type Limits corev1.ResourceList

// ConsolidationPolicy selects which nodes consolidation may act on.
type ConsolidationPolicy string

const (
	// ConsolidationPolicyWhenEmpty only removes nodes that run no workload pods.
	ConsolidationPolicyWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationPolicyWhenEmptyOrUnderutilized removes or replaces any node
	// when that lowers cost.
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced consolidates only when the savings justify the
	// disruption.
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// Disruption configures consolidation and disruption budgets.
type Disruption struct {
	// ConsolidateAfter is how long a node must go without pods being added or
	// removed before it may be consolidated; "Never" disables consolidation.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default="0s"
	// +optional
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`
	// ConsolidationPolicy says which nodes consolidation may act on.
	// +kubebuilder:default=WhenEmptyOrUnderutilized
	// +kubebuilder:validation:Enum={WhenEmpty,WhenEmptyOrUnderutilized,Balanced}
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many of the pool's nodes may be disrupting at once. The
	// most restrictive active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty" hash:"ignore"`
}

// DisruptionReason is why a node is being disrupted.
// +kubebuilder:validation:Enum={Underutilized,Empty,Drifted}
type DisruptionReason string

const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Budget limits how many nodes may be disrupting at once, optionally only in a
// recurring time window and only for some reasons.
type Budget struct {
	// Reasons this budget applies to; unset means every reason.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage of the pool's nodes ("10%", rounded
	// up).
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:default="10%"
	// +required
	Nodes string `json:"nodes"`
	// Schedule is a cron expression, evaluated in UTC, that opens the budget's
	// window; it needs Duration.
	// +kubebuilder:validation:Pattern=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty" hash:"ignore"`
	// Duration is how long the window stays open after each schedule hit.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty" hash:"ignore"`
}

// NodeClaimTemplate is the template a NodePool stamps NodeClaims from.
type NodeClaimTemplate struct {
	// +optional
	ObjectMeta ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the subset of metadata a template may set on its NodeClaims
// and nodes.
type ObjectMeta struct {
	// Labels are copied to NodeClaims and nodes and act as single-value
	// requirements.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != 'kubernetes.io/hostname')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || !x.find('^([^/]+)').endsWith('karpenter.sh'))"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self.all(x, x in ['karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/nitro-sandbox', 'karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !x.find('^([^/]+)').endsWith('karpenter.k8s.aws'))"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.kwok.sh\" is restricted",rule="self.all(x, x in ['karpenter.kwok.sh/kwoknodeclass', 'karpenter.kwok.sh/instance-size', 'karpenter.kwok.sh/instance-family', 'karpenter.kwok.sh/instance-cpu', 'karpenter.kwok.sh/instance-memory'] || !x.find('^([^/]+)').endsWith('karpenter.kwok.sh'))"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are copied to NodeClaims and nodes.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is the NodeClaim spec a NodePool stamps out. Its
// requirements may not name karpenter.sh/nodepool (Nodewright sets that).
type NodeClaimTemplateSpec struct {
	// Taints are placed on the node; pods must tolerate them to land there.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are placed on the node at registration and are expected to
	// be removed by an agent; the node is not Initialized until they are gone.
	// Pods need not tolerate them.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain instance types, zones, capacity types and labels.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x.key != 'karpenter.sh/nodepool')"
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements" hash:"ignore"`
	// NodeClassRef points at the provider NodeClass. Its group and kind cannot
	// change; changing its name drifts the pool's nodes.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long a node may take to drain once its
	// deletion starts; after it, pods are deleted regardless of PDBs and
	// do-not-disrupt. Unset waits forever.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the longest a node may live, counted from the creation of
	// its NodeClaim; "Never" disables expiry.
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodePoolStatus is what Nodewright observes about a NodePool.
type NodePoolStatus struct {
	// Resources is the total capacity of the pool's nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of nodes the pool holds.
	// +kubebuilder:default=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// NodeClassObservedGeneration is the generation of the NodeClass last seen.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Conditions: Ready, ValidationSucceeded, NodeClassReady,
	// NodeRegistrationHealthy.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePool condition types.
const (
	ConditionTypeReady                   = "Ready"
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)
