package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one request for one node: the requirements the node must meet,
// the resources it was sized for, and the provider NodeClass that configures
// it. Nodewright creates NodeClaims from NodePools; a user may also create one
// by hand. Its spec cannot change once created.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec NodeClaimSpec `json:"spec"`
	// +optional
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec describes the node a NodeClaim asks for.
type NodeClaimSpec struct {
	// Taints are placed on the node.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are placed on the node at registration and removed by an
	// agent; the node is not Initialized until they are gone.
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the node's instance type, zone, capacity type and labels meet.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources the node was sized for: the pods' requests plus daemon overhead.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty" hash:"ignore"`
	// NodeClassRef points at the provider NodeClass.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long the node may take to drain.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the longest the node may live; "Never" disables expiry.
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// ResourceRequirements are the resources a NodeClaim was sized for.
type ResourceRequirements struct {
	// Requests is the sum of the pods' requests and daemon overhead.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is what Nodewright observes about a NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the name of the node that registered for this claim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID links the claim to its instance and node.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the machine image the instance booted.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the provider's estimate of the node's capacity.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is the provider's estimate of what pods may use.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready, Consolidatable,
	// Drifted, DisruptionReason, Drained, VolumesDetached, InstanceTerminating.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is the last time a pod was bound to or left the node;
	// consolidateAfter counts from it.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitzero"`
}

// NodeClaim condition types (Ready is shared with NodePool).
const (
	ConditionTypeLaunched             = "Launched"
	ConditionTypeRegistered           = "Registered"
	ConditionTypeInitialized          = "Initialized"
	ConditionTypeConsolidatable       = "Consolidatable"
	ConditionTypeDrifted              = "Drifted"
	ConditionTypeDisruptionReason     = "DisruptionReason"
	ConditionTypeDrained              = "Drained"
	ConditionTypeVolumesDetached      = "VolumesDetached"
	ConditionTypeInstanceTerminating  = "InstanceTerminating"
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
)
