package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass configures the AWS side of the nodes a NodePool launches: which
// AMIs, subnets and security groups to use, the IAM role, block devices, user
// data and kubelet settings.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EC2NodeClassSpec `json:"spec"`
	// +optional
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is what an EC2NodeClass asks for.
//
// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this.",rule="(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"
// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets instances launch into. Terms are
	// ORed; the fields of one term are ANDed.
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.exists(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms" hash:"ignore"`
	// SecurityGroupSelectorTerms select the security groups of the instances.
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.exists(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.exists(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms" hash:"ignore"`
	// CapacityReservationSelectorTerms select On-Demand Capacity Reservations
	// and capacity blocks, which become reserved offerings.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with tags in a capacity reservation selector term",rule="!self.exists(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty" hash:"ignore"`
	// PlacementGroupSelector selects a placement group by name or id.
	// +kubebuilder:validation:XValidation:message="expected exactly one of ['name', 'id']",rule="has(self.name) != has(self.id)"
	// +optional
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`
	// AssociatePublicIPAddress overrides the subnet's default for public IPs.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// IPPrefixCount is the number of IPv4 prefixes on the primary interface.
	// +kubebuilder:validation:Minimum=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty" hash:"ignore"`
	// AMISelectorTerms select the machine images. An alias (family@version)
	// must be the only term.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms" hash:"ignore"`
	// AMIFamily selects the bootstrap format and default block devices; it is
	// inferred from an alias term when unset.
	// +kubebuilder:validation:Enum={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty" hash:"ignore"`
	// UserData is merged with the bootstrap Nodewright generates (passed as is
	// for the Custom family).
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role of the nodes; Nodewright manages an instance profile
	// for it. Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="role cannot be empty"
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing instance profile to use instead of a role.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="instanceProfile cannot be empty"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are applied to instances, volumes, launch templates and interfaces.
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k != 'eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster'))"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k != 'karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet settings passed to the node's bootstrap. Fields Nodewright does
	// not model are kept as written.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty" hash:"ignore"`
	// BlockDeviceMappings configure the instance's EBS volumes.
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume) ? x.rootVolume : false).size() <= 1"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy says how local NVMe instance store is used; RAID0
	// stripes it for kubelet and container storage.
	// +kubebuilder:validation:Enum={RAID0}
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// NetworkInterfaces configure the interfaces (and EFA) of the instance.
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include the primary interface (networkCardIndex 0, deviceIndex 0, interfaceType interface)",rule="self.exists(x, x.networkCardIndex == 0 && x.deviceIndex == 0 && x.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkCardIndex and deviceIndex pairs must be unique",rule="self.all(x, self.filter(y, y.networkCardIndex == x.networkCardIndex && y.deviceIndex == x.deviceIndex).size() == 1)"
	// +kubebuilder:validation:XValidation:message="at most one efa-only interface per network card",rule="self.all(x, x.interfaceType != 'efa-only' || self.filter(y, y.networkCardIndex == x.networkCardIndex && y.interfaceType == 'efa-only').size() == 1)"
	// +kubebuilder:validation:MaxItems=150
	// +optional
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`
	// DetailedMonitoring turns on 1-minute CloudWatch monitoring.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure the instance metadata service.
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// ConnectionTracking configures connection-tracking timeouts.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`
	// Context is the EC2 Fleet context.
	// +optional
	Context *string `json:"context,omitempty"`
	// CPUOptions filter and configure instance CPU features.
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or by id.
type SubnetSelectorTerm struct {
	// Tags to match; a value of "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID of a subnet.
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or group name.
type SecurityGroupSelectorTerm struct {
	// Tags to match; a value of "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID of a security group.
	// +kubebuilder:validation:Pattern="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name of a security group (its group name, not its Name tag).
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations.
type CapacityReservationSelectorTerm struct {
	// Tags to match; a value of "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID of a capacity reservation.
	// +kubebuilder:validation:Pattern="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the account that owns the reservation.
	// +kubebuilder:validation:Pattern="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria selects open or targeted reservations.
	// +kubebuilder:validation:Enum={open,targeted}
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// PlacementGroupSelector selects one placement group.
type PlacementGroupSelector struct {
	// Name of the placement group.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`
	// ID of the placement group.
	// +kubebuilder:validation:Pattern="^pg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
}

// AMISelectorTerm selects machine images by alias, id, name, owner, tags or an
// SSM parameter.
type AMISelectorTerm struct {
	// Alias names an EKS-optimized image as family@version, e.g. al2023@latest
	// or bottlerocket@v1.20.0.
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.find('^[^@]+') in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.find('^[^@]+') in ['windows2019', 'windows2022', 'windows2025'] ? self.find('[^@]+$') == 'latest' : true"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags to match; a value of "*" matches any value.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID of an image.
	// +kubebuilder:validation:Pattern="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name of an image; wildcards are allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner is an account id or alias (self, amazon).
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is the name of an SSM parameter that holds an image id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// InstanceStorePolicy says how instance store volumes are used.
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all instance store volumes into one.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// MetadataOptions configure the instance metadata service.
type MetadataOptions struct {
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// ConnectionTracking configures connection-tracking timeouts, in seconds.
type ConnectionTracking struct {
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions configure instance CPU features.
type CPUOptions struct {
	// NestedVirtualization restricts instance types to those that support (or
	// not) nested virtualization.
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// NetworkInterface configures one network interface of the instance.
type NetworkInterface struct {
	// +kubebuilder:validation:Minimum=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`
	// +kubebuilder:validation:Minimum=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`
	// +kubebuilder:validation:Enum={interface,efa-only}
	// +required
	InterfaceType string `json:"interfaceType"`
}
