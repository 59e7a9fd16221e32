package catalog

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Offering is one way to buy an instance type: a zone, a capacity type and a
// price per hour.
type Offering struct {
	Zone         string
	CapacityType string // on-demand, spot or reserved
	Price        float64
	Available    bool
}

// InstanceType is one machine shape.
type InstanceType struct {
	Name string
	// Labels are the single-valued labels every node of this type carries
	// (instance type, arch, provider labels); zone and capacity type come from
	// the offering.
	Labels map[string]string
	// OperatingSystems the type can run (kubernetes.io/os values).
	OperatingSystems []string
	// Capacity is the node's full capacity, including pods and extended
	// resources.
	Capacity corev1.ResourceList
	// Allocatable is what pods may use: capacity minus kube-reserved,
	// system-reserved and the eviction threshold.
	Allocatable corev1.ResourceList
	Offerings   []Offering
}

// Holds reports whether every request fits the type's allocatable (a
// resource it does not list is zero).
func (it *InstanceType) Holds(requests corev1.ResourceList) bool {
	for name, q := range requests {
		if q.Cmp(it.Allocatable[name]) > 0 {
			return false
		}
	}
	return true
}

// Available returns the offerings that can be launched now.
func (it *InstanceType) Available() []Offering {
	out := make([]Offering, 0, len(it.Offerings))
	for _, o := range it.Offerings {
		if o.Available {
			out = append(out, o)
		}
	}
	return out
}

// Cheapest returns the cheapest available offering accepted by keep, and
// false when there is none.
func (it *InstanceType) Cheapest(keep func(Offering) bool) (Offering, bool) {
	best, found := Offering{}, false
	for _, o := range it.Offerings {
		if !o.Available || (keep != nil && !keep(o)) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && less(o, best)) {
			best, found = o, true
		}
	}
	return best, found
}

// less orders offerings of equal price deterministically.
func less(a, b Offering) bool {
	if a.CapacityType != b.CapacityType {
		return capacityTypeRank(a.CapacityType) < capacityTypeRank(b.CapacityType)
	}
	return a.Zone < b.Zone
}

// capacityTypeRank is the launch precedence: reserved, then spot, then
// on-demand.
func capacityTypeRank(ct string) int {
	switch ct {
	case karpv1.CapacityTypeReserved:
		return 0
	case karpv1.CapacityTypeSpot:
		return 1
	default:
		return 2
	}
}

// Zones returns the zones of the type's offerings, sorted.
func (it *InstanceType) Zones() []string {
	var zones []string
	for _, o := range it.Offerings {
		zones = append(zones, o.Zone)
	}
	slices.Sort(zones)
	return slices.Compact(zones)
}

// CapacityTypes returns the capacity types of the type's offerings, sorted.
func (it *InstanceType) CapacityTypes() []string {
	var cts []string
	for _, o := range it.Offerings {
		cts = append(cts, o.CapacityType)
	}
	slices.Sort(cts)
	return slices.Compact(cts)
}
