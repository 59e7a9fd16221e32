package v1

import corev1 "k8s.io/api/core/v1"

// Operators Karpenter adds to the core node selector operators: integer bounds
// that include the bound itself.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement that may
// also demand flexibility: with minValues set, the instance types a NodeClaim may
// launch as must span at least that many distinct values of the key.
//
// The per-item rules live here so that an error names the offending index,
// e.g. spec.template.spec.requirements[2].
//
// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.operator == 'In' ? (has(self.values) && self.values.size() != 0) : true"
// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",rule="self.operator in ['Gt', 'Lt', 'Gte', 'Lte'] ? (has(self.values) && self.values.size() == 1 && self.values[0].matches('^[0-9]+$')) : true"
// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="(self.operator == 'In' && has(self.minValues)) ? (has(self.values) && self.values.size() >= self.minValues) : true"
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9]))*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != 'kubernetes.io/hostname'"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || !self.find('^([^/]+)').endsWith('karpenter.sh')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self in ['karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/nitro-sandbox', 'karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !self.find('^([^/]+)').endsWith('karpenter.k8s.aws')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.kwok.sh\" is restricted",rule="self in ['karpenter.kwok.sh/kwoknodeclass', 'karpenter.kwok.sh/instance-size', 'karpenter.kwok.sh/instance-family', 'karpenter.kwok.sh/instance-cpu', 'karpenter.kwok.sh/instance-memory'] || !self.find('^([^/]+)').endsWith('karpenter.kwok.sh')"
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values.
	// +kubebuilder:validation:Enum={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values for In and NotIn; a single non-negative integer for Gt, Lt, Gte and
	// Lte; none for Exists and DoesNotExist.
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the minimum number of distinct values of Key that the
	// instance-type options of a launched NodeClaim must span.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeClassReference points at the provider NodeClass (e.g. an EC2NodeClass)
// that configures the cloud side of a node.
type NodeClassReference struct {
	// Kind of the NodeClass, e.g. EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the NodeClass, e.g. karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}
