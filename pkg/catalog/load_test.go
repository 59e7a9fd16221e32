package catalog

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDefaultCatalog(t *testing.T) {
	types, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 1345 {
		t.Errorf("embedded catalog has %d types, want 1345", len(types))
	}
	var m5 *InstanceType
	gpus := 0
	for i := range types {
		if types[i].Name == "m5.large" {
			m5 = &types[i]
		}
		if q, ok := types[i].Capacity["nvidia.com/gpu"]; ok && !q.IsZero() {
			gpus++
		}
	}
	if gpus != 59 {
		t.Errorf("%d types with NVIDIA GPUs, want 59", gpus)
	}
	if m5 == nil {
		t.Fatal("m5.large is missing")
	}
	if m5.Labels["karpenter.k8s.aws/instance-family"] != "m5" || m5.Labels[corev1.LabelArchStable] != "amd64" || m5.Labels[corev1.LabelOSStable] != "linux" {
		t.Errorf("m5.large labels: %v", m5.Labels)
	}
	if len(m5.Offerings) != 6 || len(m5.Zones()) != 3 || strings.Join(m5.CapacityTypes(), ",") != "on-demand,spot" {
		t.Errorf("m5.large offerings: %+v", m5.Offerings)
	}
	alloc, capacity := m5.Allocatable[corev1.ResourceMemory], m5.Capacity[corev1.ResourceMemory]
	if alloc.Cmp(capacity) >= 0 || alloc.IsZero() {
		t.Errorf("m5.large allocatable memory %s is not below capacity %s", alloc.String(), capacity.String())
	}
	cheapest, ok := m5.Cheapest(nil)
	if !ok || cheapest.CapacityType != "spot" {
		t.Errorf("cheapest m5.large offering = %+v, want a spot one", cheapest)
	}
	od, ok := m5.Cheapest(func(o Offering) bool { return o.CapacityType == "on-demand" })
	if !ok || od.Price != 0.096 {
		t.Errorf("on-demand m5.large = %+v, want the $0.096 list price", od)
	}
}

func TestKWOKShapes(t *testing.T) {
	const flat = `[{"name": "c-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	  "resources": {"cpu": "4", "memory": "8Gi", "pods": "64", "ephemeral-storage": "20Gi"},
	  "offerings": [{"capacityType": "spot", "zone": "test-zone-a", "price": 0.07},
	                {"capacityType": "on-demand", "zone": "test-zone-a", "price": 0.1}]}]`
	const withRequirements = `[{"name": "m-2x-arm64-linux", "architecture": "arm64", "operatingSystems": ["linux", "windows"],
	  "resources": {"cpu": "2", "memory": "16Gi"},
	  "offerings": [{"Price": 0.05, "Available": false, "Requirements": [
	     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
	     {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-b"]}]}]}]`

	types, err := Parse("flat.json", []byte(flat))
	if err != nil {
		t.Fatal(err)
	}
	c := types[0]
	if c.Labels["karpenter.kwok.sh/instance-family"] != "c" || c.Labels["karpenter.kwok.sh/instance-size"] != "4" ||
		c.Labels["karpenter.kwok.sh/instance-memory"] != "8192" || c.Labels[corev1.LabelInstanceTypeStable] != "c-4x-amd64-linux" {
		t.Errorf("kwok labels: %v", c.Labels)
	}
	// No allocatable in the file: kube-reserved 100m CPU and 10Mi is taken off.
	if cpu := c.Allocatable[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("3900m")) != 0 {
		t.Errorf("allocatable cpu %s, want 3900m", cpu.String())
	}
	if mem := c.Allocatable[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("8182Mi")) != 0 {
		t.Errorf("allocatable memory %s, want 8182Mi", mem.String())
	}

	types, err = Parse("requirements.json", []byte(withRequirements))
	if err != nil {
		t.Fatal(err)
	}
	m := types[0]
	want := Offering{Zone: "test-zone-b", CapacityType: "spot", Price: 0.05, Available: false}
	if len(m.Offerings) != 1 || m.Offerings[0] != want {
		t.Errorf("offerings %+v, want [%+v]", m.Offerings, want)
	}
	if _, ok := m.Cheapest(nil); ok {
		t.Error("an unavailable offering was offered as the cheapest")
	}
	if _, ok := m.Labels[corev1.LabelOSStable]; ok || len(m.OperatingSystems) != 2 {
		t.Errorf("a two-OS type got labels %v, OSes %v", m.Labels, m.OperatingSystems)
	}
	if pods := m.Capacity[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("pods defaulted to %s, want 110", pods.String())
	}
}

func TestParseRejectsMalformedCatalogs(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"not an array", `{"name": "x"}`, "catalog bad.json: not a JSON array"},
		{"empty", `[]`, "no instance types"},
		{"no name", `[{"architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"}}]`, `[0] "": name: required`},
		{"bad quantity", `[{"name": "x", "architecture": "amd64", "resources": {"cpu": "lots", "memory": "1Gi"}}]`, `instance type [0] "x"`},
		{"no cpu", `[{"name": "x", "architecture": "amd64", "resources": {"memory": "1Gi"}}]`, "resources.cpu: required"},
		{"no architecture", `[{"name": "x", "resources": {"cpu": "1", "memory": "1Gi"}}]`, "architecture: required"},
		{"unknown capacity type", `[{"name": "x", "architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"},
			"offerings": [{"capacityType": "preemptible", "zone": "a", "price": 1}]}]`, `offerings[0]: capacityType: "preemptible"`},
		{"no price", `[{"name": "x", "architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"},
			"offerings": [{"capacityType": "spot", "zone": "a"}]}]`, "offerings[0]: price: required"},
		{"no zone", `[{"name": "x", "architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"},
			"offerings": [{"capacityType": "spot", "price": 1}]}]`, "offerings[0]: zone: required"},
		{"duplicate", `[{"name": "x", "architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"}},
			{"name": "x", "architecture": "amd64", "resources": {"cpu": "1", "memory": "1Gi"}}]`, `[1] "x": duplicate name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.json", []byte(c.data))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.json") {
				t.Errorf("error %q does not name the file and say %q", err, c.want)
			}
		})
	}
}
