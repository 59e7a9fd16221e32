package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// The instance types of Karpenter's kwok provider: three families, twelve
// sizes, two architectures and two operating systems, offered in four zones
// as spot and on-demand.
var (
	kwokFamilies = []struct {
		name       string
		gibPerVCPU int64
	}{{"c", 2}, {"s", 4}, {"m", 8}}
	kwokVCPUs = []int64{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256}
	kwokArchs = []string{"amd64", "arm64"}
	kwokOSes  = []string{"linux", "windows"}
	kwokZones = []string{"test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"}
)

// catalogEntry is one instance type in the JSON shape pkg/catalog.Parse
// reads. Without allocatable, Parse subtracts kube-reserved 100m CPU and
// 10Mi, as Karpenter's kwok provider does.
type catalogEntry struct {
	Name             string            `json:"name"`
	Architecture     string            `json:"architecture"`
	OperatingSystems []string          `json:"operatingSystems"`
	Resources        map[string]string `json:"resources"`
	Offerings        []catalogOffering `json:"offerings"`
}

type catalogOffering struct {
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

// onDemandPrice is the hourly on-demand price of a kwok type: 0.025 per
// vCPU plus 0.001 per GiB of memory. Spot costs 0.7 times that.
func onDemandPrice(vcpu, memGiB int64) float64 {
	return 0.025*float64(vcpu) + 0.001*float64(memGiB)
}

const spotDiscount = 0.7

// kwokCatalog returns the 144 instance types.
func kwokCatalog() []catalogEntry {
	var out []catalogEntry
	for _, fam := range kwokFamilies {
		for _, n := range kwokVCPUs {
			mem := n * fam.gibPerVCPU
			od := onDemandPrice(n, mem)
			for _, arch := range kwokArchs {
				for _, os := range kwokOSes {
					e := catalogEntry{
						Name:             fmt.Sprintf("%s-%dx-%s-%s", fam.name, n, arch, os),
						Architecture:     arch,
						OperatingSystems: []string{os},
						Resources: map[string]string{
							"cpu":               strconv.FormatInt(n, 10),
							"memory":            fmt.Sprintf("%dGi", mem),
							"pods":              strconv.FormatInt(min(16*n, 1024), 10),
							"ephemeral-storage": "20Gi",
						},
					}
					for _, z := range kwokZones {
						e.Offerings = append(e.Offerings,
							catalogOffering{CapacityType: karpv1.CapacityTypeSpot, Zone: z, Price: round6(od * spotDiscount), Available: true},
							catalogOffering{CapacityType: karpv1.CapacityTypeOnDemand, Zone: z, Price: round6(od), Available: true})
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// round6 drops float noise (0.7 × 0.125 = 0.08750000000000001) from the
// prices written to the file.
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// writeCatalog writes the catalog as JSON into dir and returns its path.
func writeCatalog(dir string, entries []catalogEntry) (string, error) {
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the catalog: %w", err)
	}
	path := filepath.Join(dir, "kwok-catalog.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the catalog %s: %w", path, err)
	}
	return path, nil
}

// priceKey names one offering a node can run on.
type priceKey struct{ instanceType, capacityType, zone string }

// priceBook prices nodes by their instance type, capacity type and zone.
type priceBook map[priceKey]float64

func newPriceBook(entries []catalogEntry) priceBook {
	b := priceBook{}
	for _, e := range entries {
		for _, o := range e.Offerings {
			b[priceKey{e.Name, o.CapacityType, o.Zone}] = o.Price
		}
	}
	return b
}

// price of one node from its labels; false when the labels name no offering.
func (b priceBook) price(labels map[string]string) (float64, bool) {
	p, ok := b[priceKey{
		labels[corev1.LabelInstanceTypeStable],
		labels[karpv1.LabelCapacityType],
		labels[corev1.LabelTopologyZone],
	}]
	return p, ok
}
