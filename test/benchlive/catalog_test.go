package main

import (
	"encoding/json"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// The generated catalog is Karpenter's kwok list as pkg/catalog reads it:
// 144 types, sized and priced by the formulas, kube-reserved taken
// off allocatable.
func TestKWOKCatalogParsesAsKarpentersList(t *testing.T) {
	entries := kwokCatalog()
	data, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	types, err := catalog.Parse("bench", data)
	if err != nil {
		t.Fatalf("catalog.Parse rejects the generated catalog: %v", err)
	}
	if len(types) != 144 {
		t.Fatalf("%d instance types, want 144", len(types))
	}
	byName := map[string]catalog.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	tests := []struct {
		name                 string
		cpu, mem, pods       string
		allocCPU             string
		os, arch             string
		onDemand, spot       float64
		offeringsPerTypeWant int
	}{
		{"c-4x-amd64-linux", "4", "8Gi", "64", "3900m", "linux", "amd64", 0.108, 0.0756, 8},
		{"s-1x-arm64-windows", "1", "4Gi", "16", "900m", "windows", "arm64", 0.029, 0.0203, 8},
		{"m-256x-amd64-linux", "256", "2048Gi", "1024", "255900m", "linux", "amd64", 8.448, 5.9136, 8},
		{"m-96x-arm64-linux", "96", "768Gi", "1024", "95900m", "linux", "arm64", 3.168, 2.2176, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it, ok := byName[tt.name]
			if !ok {
				t.Fatalf("no type %s", tt.name)
			}
			for r, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: tt.cpu, corev1.ResourceMemory: tt.mem, corev1.ResourcePods: tt.pods, corev1.ResourceEphemeralStorage: "20Gi"} {
				if got := it.Capacity[r]; got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("capacity %s = %s, want %s", r, got.String(), want)
				}
			}
			if got := it.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tt.allocCPU)) != 0 {
				t.Errorf("allocatable cpu = %s, want %s", got.String(), tt.allocCPU)
			}
			if it.Labels[corev1.LabelOSStable] != tt.os || it.Labels[corev1.LabelArchStable] != tt.arch {
				t.Errorf("labels %v, want os %s arch %s", it.Labels, tt.os, tt.arch)
			}
			if len(it.Offerings) != tt.offeringsPerTypeWant {
				t.Fatalf("%d offerings, want %d", len(it.Offerings), tt.offeringsPerTypeWant)
			}
			for _, o := range it.Offerings {
				want := tt.onDemand
				if o.CapacityType == karpv1.CapacityTypeSpot {
					want = tt.spot
				}
				if math.Abs(o.Price-want) > 1e-9 || !o.Available {
					t.Errorf("offering %s/%s: price %v available %v, want %v and available", o.Zone, o.CapacityType, o.Price, o.Available, want)
				}
			}
		})
	}
}

func TestPriceBookPricesNodesByTheirLabels(t *testing.T) {
	book := newPriceBook(kwokCatalog())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"spot", map[string]string{corev1.LabelInstanceTypeStable: "c-8x-amd64-linux", karpv1.LabelCapacityType: "spot", corev1.LabelTopologyZone: "test-zone-c"}, 0.1512, true},
		{"on-demand", map[string]string{corev1.LabelInstanceTypeStable: "c-8x-amd64-linux", karpv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: "test-zone-a"}, 0.216, true},
		{"unknown zone", map[string]string{corev1.LabelInstanceTypeStable: "c-8x-amd64-linux", karpv1.LabelCapacityType: "spot", corev1.LabelTopologyZone: "zone-x"}, 0, false},
		{"no labels", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := book.price(tt.labels)
			if ok != tt.found || math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("price = %v, %v; want %v, %v", got, ok, tt.want, tt.found)
			}
		})
	}
}
