package instancetype

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// describeAll reads every instance type from a fake of the embedded
// catalog through the SDK.
func describeAll(t *testing.T) ([]ec2types.InstanceTypeInfo, map[string]catalog.InstanceType) {
	t.Helper()
	types, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, err := fake.New(fake.Options{InstanceTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	client := ec2.NewFromConfig(fake.InProcessConfig(f))
	var all []ec2types.InstanceTypeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(20)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out.InstanceTypes...)
	}
	byName := map[string]catalog.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	return all, byName
}

// For every one of the catalog's 1,345 types, the allocatable CPU, memory
// and pods computed from EC2's description equal those Karpenter
// publishes for AL2023 nodes.
func TestAllocatableMatchesKarpentersPublishedValues(t *testing.T) {
	infos, catalogTypes := describeAll(t)
	if len(infos) != len(catalogTypes) {
		t.Fatalf("%d types described, catalog has %d", len(infos), len(catalogTypes))
	}
	mismatches := 0
	for _, info := range infos {
		want := catalogTypes[string(info.InstanceType)].Allocatable
		got := Allocatable(info, Capacity(info, DefaultSettings))
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, "nvidia.com/gpu", "amd.com/gpu"} {
			g, w := got[r], want[r]
			if g.Cmp(w) != 0 {
				mismatches++
				if mismatches <= 10 {
					t.Errorf("%s %s: computed %s, published %s", info.InstanceType, r, g.String(), w.String())
				}
			}
		}
	}
	if mismatches > 0 {
		t.Errorf("%d mismatches in all", mismatches)
	}
}

// Every type's labels, read from its description, are the catalog's
// (Karpenter's published labels): all 1,345 types, every key.
func TestLabels(t *testing.T) {
	infos, catalogTypes := describeAll(t)
	wrong := map[string]int{}
	for _, info := range infos {
		name := string(info.InstanceType)
		got, want := Labels(info), catalogTypes[name].Labels
		for key, v := range want {
			if key == corev1.LabelOSStable {
				continue // the provider adds it for the images it boots
			}
			if got[key] != v {
				if wrong[key] < 3 {
					t.Errorf("%s %s = %q, want %q", name, key, got[key], v)
				}
				wrong[key]++
			}
		}
	}
	for key, n := range wrong {
		t.Errorf("%s wrong on %d types", key, n)
	}
}

func TestSettings(t *testing.T) {
	infos, _ := describeAll(t)
	var m5 ec2types.InstanceTypeInfo
	for _, info := range infos {
		if info.InstanceType == "m5.large" {
			m5 = info
		}
	}
	reserved := Capacity(m5, Settings{VMMemoryOverheadPercent: 0.075, ReservedENIs: 1})
	if pods := reserved.Pods().Value(); pods != 20 {
		t.Errorf("m5.large with one reserved ENI: %d pods, want 2 × 9 + 2 = 20", pods)
	}
	maxPods := int32(110)
	capped := Capacity(m5, Settings{VMMemoryOverheadPercent: 0.075, MaxPods: &maxPods})
	if pods := capped.Pods().Value(); pods != 110 {
		t.Errorf("maxPods 110: %d pods", pods)
	}
}
