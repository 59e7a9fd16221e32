package conformance

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Labels the fake provider's instance types define.
const (
	labelSize    = "size"    // small, or large above 4 CPU and 8 Gi
	labelSpecial = "special" // "optional" on large types only
	labelInteger = "integer" // the CPU count
	gpuVendorA   = corev1.ResourceName("fake.com/vendor-a")
	gpuVendorB   = corev1.ResourceName("fake.com/vendor-b")
)

// fakeType describes one of the fake provider's instance types; zero
// fields take its defaults (4 CPU, 4 Gi, 5 pods, amd64, linux windows
// darwin, the default offerings).
type fakeType struct {
	name      string
	resources corev1.ResourceList
	arch      string
	os        []string
	offerings []catalog.Offering
}

// FakeCatalog is the fake provider's default instance-type list (the
// integration tests decide over it too).
func FakeCatalog() []catalog.InstanceType {
	return buildTypes(
		fakeType{name: "default-instance-type"},
		fakeType{name: "small-instance-type", resources: list("cpu", "2", "memory", "2Gi")},
		fakeType{name: "gpu-vendor-instance-type", resources: list(string(gpuVendorA), "2")},
		fakeType{name: "gpu-vendor-b-instance-type", resources: list(string(gpuVendorB), "2")},
		fakeType{name: "arm-instance-type", arch: "arm64", os: []string{"ios", "linux", "windows", "darwin"}, resources: list("cpu", "16", "memory", "128Gi")},
		fakeType{name: "single-pod-instance-type", resources: list("pods", "1")},
	)
}

// growingCatalog is the fake provider's InstanceTypes(n): type i has i+1
// CPU, 2(i+1) Gi and 10(i+1) pods.
func growingCatalog(n int) []catalog.InstanceType {
	var types []fakeType
	for i := range n {
		types = append(types, fakeType{name: fmt.Sprintf("fake-it-%d", i),
			resources: list("cpu", fmt.Sprint(i+1), "memory", fmt.Sprintf("%dGi", 2*(i+1)), "pods", fmt.Sprint(10*(i+1)))})
	}
	return buildTypes(types...)
}

func buildTypes(specs ...fakeType) []catalog.InstanceType {
	out := make([]catalog.InstanceType, 0, len(specs))
	for _, s := range specs {
		out = append(out, s.build())
	}
	return out
}

func (s fakeType) build() catalog.InstanceType {
	capacity := list("cpu", "4", "memory", "4Gi", "pods", "5")
	for name, q := range s.resources {
		capacity[name] = q
	}
	arch := s.arch
	if arch == "" {
		arch = "amd64"
	}
	oses := s.os
	if len(oses) == 0 {
		oses = []string{"linux", "windows", "darwin"}
	}
	price := fakePrice(capacity)
	offerings := s.offerings
	if len(offerings) == 0 {
		for _, o := range []struct{ ct, zone string }{
			{karpv1.CapacityTypeSpot, "test-zone-1"}, {karpv1.CapacityTypeSpot, "test-zone-2"},
			{karpv1.CapacityTypeOnDemand, "test-zone-1"}, {karpv1.CapacityTypeOnDemand, "test-zone-2"}, {karpv1.CapacityTypeOnDemand, "test-zone-3"},
		} {
			offerings = append(offerings, catalog.Offering{Zone: o.zone, CapacityType: o.ct, Price: price, Available: true})
		}
	}
	labels := map[string]string{
		corev1.LabelInstanceTypeStable: s.name,
		corev1.LabelArchStable:         arch,
		labelInteger:                   fmt.Sprint(capacity.Cpu().Value()),
		labelSize:                      "small",
	}
	if capacity.Cpu().Cmp(resource.MustParse("4")) > 0 && capacity.Memory().Cmp(resource.MustParse("8Gi")) > 0 {
		labels[labelSize], labels[labelSpecial] = "large", "optional"
	}
	allocatable := capacity.DeepCopy()
	for name, reserved := range list("cpu", "100m", "memory", "10Mi") {
		q := allocatable[name]
		q.Sub(reserved)
		allocatable[name] = q
	}
	return catalog.InstanceType{
		Name: s.name, Labels: labels, OperatingSystems: slices.Clone(oses),
		Capacity: capacity, Allocatable: allocatable, Offerings: offerings,
	}
}

// fakePrice is the fake provider's: 0.1 per CPU, 0.1 per GB of memory and
// 1.0 per kind of GPU, whatever the offering.
func fakePrice(capacity corev1.ResourceList) float64 {
	price := 0.1*capacity.Cpu().AsApproximateFloat64() + 0.1*capacity.Memory().AsApproximateFloat64()/1e9
	for _, gpu := range []corev1.ResourceName{gpuVendorA, gpuVendorB} {
		if _, ok := capacity[gpu]; ok {
			price++
		}
	}
	return price
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}
