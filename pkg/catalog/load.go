package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

//go:embed data/aws-us-east-1.catalog.json
var defaultCatalog []byte

// DefaultName names the embedded catalog in messages.
const DefaultName = "embedded aws-us-east-1 catalog"

// Default returns the embedded AWS-like us-east-1 catalog.
func Default() ([]InstanceType, error) {
	return Parse(DefaultName, defaultCatalog)
}

// LoadFile reads a catalog file.
func LoadFile(path string) ([]InstanceType, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	return Parse(path, data)
}

// KubeReservedDefault is the overhead given to types whose catalog entry has
// no allocatable, as Karpenter's kwok provider does: 100m CPU and 10Mi.
var KubeReservedDefault = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("100m"),
	corev1.ResourceMemory: resource.MustParse("10Mi"),
}

// entry is one instance type in any supported shape. JSON field matching is
// case-insensitive, so "price" and kwok's "Price" both land in Price.
type entry struct {
	Name             string              `json:"name"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Labels           map[string]string   `json:"labels"`
	Resources        corev1.ResourceList `json:"resources"`
	Allocatable      corev1.ResourceList `json:"allocatable"`
	Offerings        []offeringEntry     `json:"offerings"`
}

type offeringEntry struct {
	CapacityType string                           `json:"capacityType"`
	Zone         string                           `json:"zone"`
	Price        *float64                         `json:"price"`
	Available    *bool                            `json:"available"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// Parse decodes a catalog: a JSON array of instance types. Errors name the
// source, the entry and the field.
func Parse(source string, data []byte) ([]InstanceType, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("catalog %s: not a JSON array of instance types: %w", source, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("catalog %s: unexpected data after the array", source)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("catalog %s: no instance types", source)
	}
	out := make([]InstanceType, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for i, r := range raw {
		var e entry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("catalog %s: instance type [%d]%s: %w", source, i, peekName(r), err)
		}
		it, err := e.instanceType()
		if err != nil {
			return nil, fmt.Errorf("catalog %s: instance type [%d] %q: %w", source, i, e.Name, err)
		}
		if seen[it.Name] {
			return nil, fmt.Errorf("catalog %s: instance type [%d] %q: duplicate name", source, i, it.Name)
		}
		seen[it.Name] = true
		out = append(out, it)
	}
	return out, nil
}

// peekName recovers the name of an entry that failed to decode, for errors.
func peekName(r json.RawMessage) string {
	var n struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(r, &n) == nil && n.Name != "" {
		return fmt.Sprintf(" %q", n.Name)
	}
	return ""
}

func (e entry) instanceType() (InstanceType, error) {
	if e.Name == "" {
		return InstanceType{}, fmt.Errorf("name: required")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := e.Resources[r]
		if !ok || q.Sign() <= 0 {
			return InstanceType{}, fmt.Errorf("resources.%s: required and positive", r)
		}
	}
	for name, q := range e.Resources {
		if q.Sign() < 0 {
			return InstanceType{}, fmt.Errorf("resources.%s: negative", name)
		}
	}
	for name, q := range e.Allocatable {
		if q.Sign() < 0 {
			return InstanceType{}, fmt.Errorf("allocatable.%s: negative", name)
		}
	}
	it := InstanceType{
		Name:             e.Name,
		Labels:           make(map[string]string, len(e.Labels)+8),
		OperatingSystems: e.OperatingSystems,
		Capacity:         e.Resources.DeepCopy(),
	}
	if _, ok := it.Capacity[corev1.ResourcePods]; !ok {
		it.Capacity[corev1.ResourcePods] = resource.MustParse("110") // kubelet's default
	}
	for k, v := range e.Labels {
		it.Labels[k] = v
	}
	arch := e.Architecture
	if arch == "" {
		arch = e.Labels[corev1.LabelArchStable]
	}
	if arch == "" {
		return InstanceType{}, fmt.Errorf("architecture: required (or labels[%s])", corev1.LabelArchStable)
	}
	it.Labels[corev1.LabelArchStable] = arch
	it.Labels[corev1.LabelInstanceTypeStable] = e.Name
	if len(it.OperatingSystems) == 0 {
		if os, ok := e.Labels[corev1.LabelOSStable]; ok {
			it.OperatingSystems = []string{os}
		} else {
			it.OperatingSystems = []string{string(corev1.Linux)}
		}
	}
	if len(it.OperatingSystems) == 1 {
		it.Labels[corev1.LabelOSStable] = it.OperatingSystems[0]
	}
	if len(e.Labels) == 0 {
		addKWOKLabels(&it)
	}
	if e.Allocatable != nil {
		it.Allocatable = e.Allocatable.DeepCopy()
	} else {
		it.Allocatable = subtract(it.Capacity, KubeReservedDefault)
	}
	for i, o := range e.Offerings {
		off, err := o.offering()
		if err != nil {
			return InstanceType{}, fmt.Errorf("offerings[%d]: %w", i, err)
		}
		it.Offerings = append(it.Offerings, off)
	}
	return it, nil
}

func (o offeringEntry) offering() (Offering, error) {
	off := Offering{CapacityType: o.CapacityType, Zone: o.Zone, Available: true}
	for _, r := range o.Requirements {
		if r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 {
			continue
		}
		switch r.Key {
		case karpv1.LabelCapacityType:
			off.CapacityType = r.Values[0]
		case corev1.LabelTopologyZone:
			off.Zone = r.Values[0]
		}
	}
	switch off.CapacityType {
	case karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot, karpv1.CapacityTypeReserved:
	case "":
		return Offering{}, fmt.Errorf("capacityType: required")
	default:
		return Offering{}, fmt.Errorf("capacityType: %q is not on-demand, spot or reserved", off.CapacityType)
	}
	if off.Zone == "" {
		return Offering{}, fmt.Errorf("zone: required")
	}
	if o.Price == nil || *o.Price < 0 {
		return Offering{}, fmt.Errorf("price: required and not negative")
	}
	off.Price = *o.Price
	if o.Available != nil {
		off.Available = *o.Available
	}
	return off, nil
}

// addKWOKLabels derives the labels Karpenter's kwok provider gives its types
// (names like c-4x-amd64-linux): family, size, cpu and memory.
func addKWOKLabels(it *InstanceType) {
	family, size := it.Name, ""
	if i := strings.IndexAny(it.Name, ".-"); i > 0 {
		family = it.Name[:i]
		if it.Name[i] == '.' {
			size = it.Name[i+1:]
		}
	}
	cpu := it.Capacity[corev1.ResourceCPU]
	mem := it.Capacity[corev1.ResourceMemory]
	if size == "" {
		size = strconv.FormatInt(cpu.Value(), 10)
	}
	it.Labels[kwokv1alpha1.LabelInstanceFamily] = family
	it.Labels[kwokv1alpha1.LabelInstanceSize] = size
	it.Labels[kwokv1alpha1.LabelInstanceCPU] = strconv.FormatInt(cpu.Value(), 10)
	it.Labels[kwokv1alpha1.LabelInstanceMemory] = strconv.FormatInt(mem.Value()/(1<<20), 10)
}

// subtract returns a − b per resource, floored at zero.
func subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	for name, q := range b {
		v, ok := out[name]
		if !ok {
			continue
		}
		v.Sub(q)
		if v.Sign() < 0 {
			v = resource.Quantity{Format: v.Format}
		}
		out[name] = v
	}
	return out
}
