package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BlockDeviceMapping attaches one EBS volume to the instance.
type BlockDeviceMapping struct {
	// DeviceName is the device the volume is exposed as, e.g. /dev/xvda.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume.
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the volume that holds the root filesystem (and so the
	// node's ephemeral storage). At most one mapping may set it.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume.
//
// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
// +kubebuilder:validation:XValidation:message="volumeInitializationRate requires snapshotID",rule="!has(self.volumeInitializationRate) || has(self.snapshotID)"
type BlockDevice struct {
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS for io1, io2 and gp3 volumes.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID is the key that encrypts the volume.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID to create the volume from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput in MiB/s for gp3 volumes.
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeInitializationRate in MiB/s when restoring from a snapshot.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
	// VolumeSize, e.g. 100Gi: at most 59000Gi, 64000G, 58Ti or 64T.
	// +kubebuilder:validation:Pattern=`^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|5[0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-3][0-9]{3}|64000)G|(?:[1-9]|[1-4][0-9]|5[0-8])Ti|(?:[1-9]|[1-5][0-9]|6[0-4])T)$`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type:=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty" hash:"string"`
	// VolumeType of the volume.
	// +kubebuilder:validation:Enum={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// KubeletConfiguration holds the kubelet settings Nodewright reads to size
// nodes and passes to the bootstrap.
//
// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true"
// +kubebuilder:validation:XValidation:message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, has(self.evictionSoftGracePeriod) && e in self.evictionSoftGracePeriod) : true"
// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, has(self.evictionSoft) && e in self.evictionSoft) : true"
type KubeletConfiguration struct {
	// ClusterDNS is the list of DNS server addresses.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods overrides the number of pods the node admits.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods per vCPU.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved resources (cpu, memory, ephemeral-storage, pid).
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved resources (cpu, memory, ephemeral-storage, pid).
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard thresholds by signal.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft thresholds by signal; each needs a grace period.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod by signal.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod in seconds.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent of disk use that triggers image garbage collection.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent that image garbage collection frees down to.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enforces CPU limits with CFS quota.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}
