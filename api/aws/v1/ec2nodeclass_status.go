package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus is what the provider resolved from the selectors.
type EC2NodeClassStatus struct {
	// Subnets the selector terms resolved to.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups the selector terms resolved to.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// CapacityReservations the selector terms resolved to.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// AMIs the selector terms resolved to, with the requirements each satisfies.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile used by the nodes.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions: Ready, AMIsReady, SubnetsReady, SecurityGroupsReady,
	// InstanceProfileReady, ValidationSucceeded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// +required
	ID string `json:"id"`
	// +required
	Zone string `json:"zone"`
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved machine image.
type AMI struct {
	// +required
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
	// Deprecated images are used only when no other image matches.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Requirements an instance type must meet to boot this image.
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// +kubebuilder:validation:Pattern="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// +kubebuilder:validation:Enum={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// +required
	InstanceType string `json:"instanceType"`
	// +kubebuilder:validation:Pattern="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// +kubebuilder:default=default
	// +kubebuilder:validation:Enum={default,capacity-block}
	// +optional
	ReservationType string `json:"reservationType,omitempty"`
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// +kubebuilder:default=active
	// +kubebuilder:validation:Enum={active,expiring}
	// +optional
	State string `json:"state,omitempty"`
}

// EC2NodeClass condition types.
const (
	ConditionTypeAMIsReady            = "AMIsReady"
	ConditionTypeSubnetsReady         = "SubnetsReady"
	ConditionTypeSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	ConditionTypeValidationSucceeded  = "ValidationSucceeded"
)
