// Package instancetype turns EC2's description of an instance type into
// what Nodewright schedules with: capacity (vCPUs, memory less the VM's
// overhead, ENI-limited pods, GPUs), allocatable (less kube-reserved and
// the eviction threshold, by the formulas EKS AMIs use) and Karpenter's
// karpenter.k8s.aws labels.
package instancetype

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
)

// Settings shape the computed resources.
type Settings struct {
	// VMMemoryOverheadPercent is the share of memory the hypervisor keeps
	// (Karpenter's VM_MEMORY_OVERHEAD_PERCENT, 0.075).
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces kept for other uses, not pods.
	ReservedENIs int32
	// MaxPods, when set, replaces the ENI-limited pod count (kubelet
	// maxPods).
	MaxPods *int32
}

// DefaultSettings are Karpenter's defaults.
var DefaultSettings = Settings{VMMemoryOverheadPercent: 0.075}

const mib = 1 << 20

// Capacity is a node's capacity: vCPUs, memory less the VM's overhead
// (and the 64 MiB Graviton firmware keeps), ENI-limited pods, 20Gi of
// ephemeral storage (the default root volume), and GPUs by manufacturer.
func Capacity(info ec2types.InstanceTypeInfo, s Settings) corev1.ResourceList {
	memMiB := aws.ToInt64(info.MemoryInfo.SizeInMiB)
	if arm64(info) {
		memMiB -= 64
	}
	memMiB -= int64(math.Ceil(float64(memMiB) * s.VMMemoryOverheadPercent))
	pods := ENILimitedPods(info, s.ReservedENIs)
	if s.MaxPods != nil {
		pods = int64(*s.MaxPods)
	}
	out := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus)), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*mib, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	if info.GpuInfo != nil {
		for _, g := range info.GpuInfo.Gpus {
			name := corev1.ResourceName("")
			switch strings.ToLower(aws.ToString(g.Manufacturer)) {
			case "nvidia":
				name = "nvidia.com/gpu"
			case "amd":
				name = "amd.com/gpu"
			}
			if name != "" {
				q := out[name]
				q.Add(*resource.NewQuantity(int64(aws.ToInt32(g.Count)), resource.DecimalSI))
				out[name] = q
			}
		}
	}
	return out
}

// ENILimitedPods is how many pods the VPC CNI can address: usable
// interfaces × (addresses per interface − 1) + 2.
func ENILimitedPods(info ec2types.InstanceTypeInfo, reservedENIs int32) int64 {
	enis := aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces) - reservedENIs
	if enis <= 0 {
		return 0
	}
	return int64(enis)*int64(aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface)-1) + 2
}

// Allocatable is capacity less kube-reserved (CPU by the EKS tiers: 6 %
// of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % of
// the rest; memory 11 MiB per ENI-limited pod + 255 MiB; 1Gi of ephemeral
// storage) and the eviction threshold (100Mi of memory, 10 % of ephemeral
// storage).
func Allocatable(info ec2types.InstanceTypeInfo, capacity corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	cpu := capacity.Cpu().MilliValue()
	reservedCPU := int64(0)
	for _, tier := range []struct {
		upTo     int64 // millicores
		fraction float64
	}{{1000, 0.06}, {2000, 0.01}, {4000, 0.005}, {math.MaxInt64, 0.0025}} {
		from := int64(0)
		switch tier.upTo {
		case 2000:
			from = 1000
		case 4000:
			from = 2000
		case math.MaxInt64:
			from = 4000
		}
		if cpu > from {
			reservedCPU += int64(float64(min(cpu, tier.upTo)-from) * tier.fraction)
		}
	}
	out[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu-reservedCPU, resource.DecimalSI)
	reservedMiB := 11*ENILimitedPods(info, 0) + 255 + 100
	out[corev1.ResourceMemory] = *resource.NewQuantity(capacity.Memory().Value()-reservedMiB*mib, resource.BinarySI)
	storage := capacity.StorageEphemeral().Value()
	out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(storage-(1<<30)-storage/10, resource.BinarySI)
	return out
}

// Labels are the karpenter.k8s.aws labels a node of the type carries,
// read from its name (family.size: category, generation) and its
// description.
func Labels(info ec2types.InstanceTypeInfo) map[string]string {
	name := string(info.InstanceType)
	family, size, _ := strings.Cut(name, ".")
	out := map[string]string{
		corev1.LabelInstanceTypeStable: name,
		corev1.LabelArchStable:         "amd64",
		awsv1.LabelInstanceFamily:      family,
		awsv1.LabelInstanceSize:        size,
		awsv1.LabelInstanceCPU:         strconv.Itoa(int(aws.ToInt32(info.VCpuInfo.DefaultVCpus))),
		awsv1.LabelInstanceMemory:      strconv.FormatInt(aws.ToInt64(info.MemoryInfo.SizeInMiB), 10),
	}
	if arm64(info) {
		out[corev1.LabelArchStable] = "arm64"
	}
	// The category is the family's leading letters; the generation the
	// digits after them, past a memory size if any (m5 → m, 5; inf2 →
	// inf, 2; u7i → u, 7; u-6tb1 → u, 1).
	if m := familyScheme.FindStringSubmatch(family); m != nil {
		out[awsv1.LabelInstanceCategory], out[awsv1.LabelInstanceGeneration] = m[1], m[2]
	}
	if h := string(info.Hypervisor); h != "" {
		out[awsv1.LabelInstanceHypervisor] = h
	}
	if info.ProcessorInfo != nil && aws.ToString(info.ProcessorInfo.Manufacturer) != "" {
		out[awsv1.LabelInstanceCPUManufacturer] = strings.ToLower(aws.ToString(info.ProcessorInfo.Manufacturer))
	}
	if info.ProcessorInfo != nil && info.ProcessorInfo.SustainedClockSpeedInGhz != nil {
		out[awsv1.LabelInstanceCPUSustainedClockSpeed] = strconv.Itoa(int(math.Round(*info.ProcessorInfo.SustainedClockSpeedInGhz * 1000)))
	}
	if info.NetworkInfo != nil {
		out[awsv1.LabelInstanceEncryptionInTransit] = strconv.FormatBool(aws.ToBool(info.NetworkInfo.EncryptionInTransitSupported))
		if cards := info.NetworkInfo.NetworkCards; len(cards) > 0 && cards[0].BaselineBandwidthInGbps != nil {
			out[awsv1.LabelInstanceNetworkBandwidth] = strconv.Itoa(int(math.Round(*cards[0].BaselineBandwidthInGbps * 1000)))
		}
	}
	if info.EbsInfo != nil && info.EbsInfo.EbsOptimizedInfo != nil && info.EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps != nil {
		out[awsv1.LabelInstanceEBSBandwidth] = strconv.Itoa(int(*info.EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && aws.ToInt64(s.TotalSizeInGB) > 0 {
		out[awsv1.LabelInstanceLocalNVME] = strconv.FormatInt(aws.ToInt64(s.TotalSizeInGB), 10)
	}
	out[awsv1.LabelInstanceCapabilityFlex] = strconv.FormatBool(strings.Contains(family, "flex"))
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		out[awsv1.LabelInstanceAcceleratorName] = strings.ToLower(aws.ToString(d.Name))
		out[awsv1.LabelInstanceAcceleratorManufacturer] = "aws"
		out[awsv1.LabelInstanceAcceleratorCount] = strconv.Itoa(int(aws.ToInt32(d.Count)))
	}
	if info.GpuInfo != nil && len(info.GpuInfo.Gpus) > 0 {
		g := info.GpuInfo.Gpus[0]
		out[awsv1.LabelInstanceGPUName] = strings.ToLower(aws.ToString(g.Name))
		out[awsv1.LabelInstanceGPUManufacturer] = strings.ToLower(aws.ToString(g.Manufacturer))
		out[awsv1.LabelInstanceGPUCount] = strconv.Itoa(int(aws.ToInt32(g.Count)))
		if g.MemoryInfo != nil {
			out[awsv1.LabelInstanceGPUMemory] = strconv.Itoa(int(aws.ToInt32(g.MemoryInfo.SizeInMiB)))
		}
	}
	return out
}

// familyScheme reads a family name: category letters, an optional
// "-NNtb" memory size (high-memory types), generation digits.
var familyScheme = regexp.MustCompile(`^([a-z]+)(?:-[0-9]+tb)?([0-9]+)`)

func arm64(info ec2types.InstanceTypeInfo) bool {
	if info.ProcessorInfo == nil {
		return false
	}
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		if a == ec2types.ArchitectureTypeArm64 {
			return true
		}
	}
	return false
}
