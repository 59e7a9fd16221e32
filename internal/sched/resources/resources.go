// Package resources is the solver's resource arithmetic: fixed-slot int64
// vectors indexed per solve, so that "does this fit" is a loop over a few
// integers instead of map lookups on resource names.
//
// CPU is counted in millicores; every other resource in its base unit (bytes
// for memory and storage, a count for pods and extended resources).
package resources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The first slots of every Index.
const (
	CPU = iota
	Memory
	Pods
	EphemeralStorage
)

// Index maps resource names to vector slots. It grows as new names are seen;
// a vector shorter than the index reads zero in the missing slots.
type Index struct {
	names []corev1.ResourceName
	slots map[corev1.ResourceName]int
	// RequestsOf, when set, gives a pod's effective requests (a caller's
	// memo of resourcehelper.PodRequests across many solves).
	RequestsOf func(*corev1.Pod) corev1.ResourceList
}

// NewIndex returns an index with cpu, memory, pods and ephemeral-storage.
func NewIndex() *Index {
	ix := &Index{slots: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		ix.slot(n)
	}
	return ix
}

// Slot returns the slot of a resource name, adding it when new.
func (ix *Index) Slot(name corev1.ResourceName) int { return ix.slot(name) }

func (ix *Index) slot(name corev1.ResourceName) int {
	if s, ok := ix.slots[name]; ok {
		return s
	}
	ix.slots[name] = len(ix.names)
	ix.names = append(ix.names, name)
	return len(ix.names) - 1
}

// Name returns the resource name of a slot.
func (ix *Index) Name(slot int) corev1.ResourceName { return ix.names[slot] }

// Len is the number of slots.
func (ix *Index) Len() int { return len(ix.names) }

// Vector converts a resource list.
func (ix *Index) Vector(rl corev1.ResourceList) Vector {
	v := make(Vector, ix.Len())
	for name, q := range rl {
		s := ix.slot(name)
		if s >= len(v) {
			v = append(v, make(Vector, s+1-len(v))...)
		}
		v[s] = value(name, q)
	}
	return v
}

// PodRequests is what a pod needs from a node: its effective requests (the
// larger of its containers' sum and any init container, with restartable
// sidecars counted throughout, plus pod overhead) and one pod slot.
func (ix *Index) PodRequests(pod *corev1.Pod) Vector {
	var rl corev1.ResourceList
	if ix.RequestsOf != nil {
		rl = ix.RequestsOf(pod)
	} else {
		rl = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	}
	v := ix.Vector(rl)
	v[Pods]++
	return v
}

// ResourceList converts back, omitting zero slots.
func (ix *Index) ResourceList(v Vector) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for s, n := range v {
		if n == 0 {
			continue
		}
		name := ix.names[s]
		if s == CPU {
			rl[name] = *resource.NewMilliQuantity(n, resource.DecimalSI)
		} else if s == Memory || s == EphemeralStorage {
			rl[name] = *resource.NewQuantity(n, resource.BinarySI)
		} else {
			rl[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return rl
}

// maxAmount caps every amount (2^53: 8 PiB of memory, 9 billion cores).
// Quantity's own conversion wraps or yields 0 beyond int64, so a request
// of 1e19 bytes would fit any node; capped, it fits none, and sums of a
// thousand capped amounts still cannot overflow.
const maxAmount = 1 << 53

func value(name corev1.ResourceName, q resource.Quantity) int64 {
	scale, factor := resource.Scale(0), 1.0
	if name == corev1.ResourceCPU {
		scale, factor = resource.Milli, 1000
	}
	if f := q.AsApproximateFloat64() * factor; f >= maxAmount {
		return maxAmount
	} else if f <= -maxAmount {
		return -maxAmount
	}
	return min(max(q.ScaledValue(scale), -maxAmount), maxAmount)
}

// Vector is a resource amount per slot of an Index.
type Vector []int64

// At returns slot s, zero beyond the vector's length.
func (v Vector) At(s int) int64 { return v.at(s) }

func (v Vector) at(s int) int64 {
	if s < len(v) {
		return v[s]
	}
	return 0
}

// Fits reports whether v fits in capacity, slot by slot.
func (v Vector) Fits(capacity Vector) bool {
	for s, n := range v {
		if n > capacity.at(s) {
			return false
		}
	}
	return true
}

// Exceeding returns the slots where v exceeds capacity.
func (v Vector) Exceeding(capacity Vector) []int {
	var out []int
	for s, n := range v {
		if n > capacity.at(s) {
			out = append(out, s)
		}
	}
	return out
}

// Plus returns v + o as a new vector.
func (v Vector) Plus(o Vector) Vector {
	out := make(Vector, max(len(v), len(o)))
	for s := range out {
		out[s] = v.at(s) + o.at(s)
	}
	return out
}

// Minus returns v − o as a new vector (slots may go negative).
func (v Vector) Minus(o Vector) Vector {
	out := make(Vector, max(len(v), len(o)))
	for s := range out {
		out[s] = v.at(s) - o.at(s)
	}
	return out
}

// Max returns the slot-wise maximum of v and o.
func (v Vector) Max(o Vector) Vector {
	out := make(Vector, max(len(v), len(o)))
	for s := range out {
		out[s] = max(v.at(s), o.at(s))
	}
	return out
}

// AddInPlace adds o to v, growing v when o is longer, and returns it.
func (v Vector) AddInPlace(o Vector) Vector {
	if len(o) > len(v) {
		v = append(v, make(Vector, len(o)-len(v))...)
	}
	for s, n := range o {
		v[s] += n
	}
	return v
}

// IsZero reports whether every slot is zero.
func (v Vector) IsZero() bool {
	return !slices.ContainsFunc(v, func(n int64) bool { return n != 0 })
}
