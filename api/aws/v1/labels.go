package v1

// Labels the AWS provider writes on NodeClaims and nodes. These are the only
// keys in the karpenter.k8s.aws domain that NodePools may use in requirements
// and template labels; the CRD's CEL rules carry the same list, and a unit test
// keeps the two in step.
const (
	LabelNodeClass                        = Group + "/ec2nodeclass"
	LabelInstanceEncryptionInTransit      = Group + "/instance-encryption-in-transit-supported"
	LabelInstanceCategory                 = Group + "/instance-category"
	LabelInstanceHypervisor               = Group + "/instance-hypervisor"
	LabelInstanceFamily                   = Group + "/instance-family"
	LabelInstanceGeneration               = Group + "/instance-generation"
	LabelInstanceLocalNVME                = Group + "/instance-local-nvme"
	LabelInstanceSize                     = Group + "/instance-size"
	LabelInstanceCPU                      = Group + "/instance-cpu"
	LabelInstanceCPUManufacturer          = Group + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeed   = Group + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                   = Group + "/instance-memory"
	LabelInstanceEBSBandwidth             = Group + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth         = Group + "/instance-network-bandwidth"
	LabelInstanceGPUName                  = Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer          = Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                 = Group + "/instance-gpu-count"
	LabelInstanceGPUMemory                = Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName          = Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer  = Group + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount         = Group + "/instance-accelerator-count"
	LabelInstanceTenancy                  = Group + "/instance-tenancy"
	LabelInstanceCapabilityFlex           = Group + "/instance-capability-flex"
	LabelNitroSandbox                     = Group + "/nitro-sandbox"
	LabelCapacityReservationID            = Group + "/capacity-reservation-id"
	LabelCapacityReservationType          = Group + "/capacity-reservation-type"
	LabelCapacityReservationInterruptible = Group + "/capacity-reservation-interruptible"
	LabelPlacementGroupID                 = Group + "/placement-group-id"
	LabelPlacementGroupPartition          = Group + "/placement-group-partition"
	LabelTopologyZoneID                   = "topology.k8s.aws/zone-id"
)

// WellKnownLabels are the karpenter.k8s.aws keys NodePools may reference.
var WellKnownLabels = []string{
	LabelNodeClass,
	LabelInstanceEncryptionInTransit,
	LabelInstanceCategory,
	LabelInstanceHypervisor,
	LabelInstanceFamily,
	LabelInstanceGeneration,
	LabelInstanceLocalNVME,
	LabelInstanceSize,
	LabelInstanceCPU,
	LabelInstanceCPUManufacturer,
	LabelInstanceCPUSustainedClockSpeed,
	LabelInstanceMemory,
	LabelInstanceEBSBandwidth,
	LabelInstanceNetworkBandwidth,
	LabelInstanceGPUName,
	LabelInstanceGPUManufacturer,
	LabelInstanceGPUCount,
	LabelInstanceGPUMemory,
	LabelInstanceAcceleratorName,
	LabelInstanceAcceleratorManufacturer,
	LabelInstanceAcceleratorCount,
	LabelInstanceTenancy,
	LabelInstanceCapabilityFlex,
	LabelNitroSandbox,
	LabelCapacityReservationID,
	LabelCapacityReservationType,
	LabelCapacityReservationInterruptible,
	LabelPlacementGroupID,
	LabelPlacementGroupPartition,
}

// Annotation keys and the finalizer of the AWS provider.
const (
	AnnotationNodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationNodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	AnnotationInstanceProfile      = Group + "/instance-profile-name"
	TerminationFinalizer           = Group + "/termination"
)
