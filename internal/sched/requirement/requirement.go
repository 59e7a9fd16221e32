package requirement

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Requirement constrains the value of one label key. The zero value accepts
// nothing; build one with New.
type Requirement struct {
	key string
	// complement: values lists the rejected values, not the accepted ones.
	complement bool
	// values is sorted and free of duplicates.
	values []string
	// gt and lt are exclusive integer bounds; when either is set a value must
	// parse as an integer within them.
	gt, lt *int64
	// absentOK: a node without the label satisfies the requirement.
	absentOK bool
	// minValues is the number of distinct values the instance-type options of
	// a NodeClaim must span; nil when unconstrained.
	minValues *int
}

// New builds the requirement "key op values". Beta label keys are normalized
// to their GA names. Gte and Lte are Karpenter's inclusive integer bounds.
func New(key string, op corev1.NodeSelectorOperator, values ...string) (Requirement, error) {
	r := Requirement{key: Normalize(key)}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.absentOK = true, true
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.absentOK = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(values) != 1 {
			return Requirement{}, fmt.Errorf("requirement %s %s: needs exactly one integer value, got %d", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return Requirement{}, fmt.Errorf("requirement %s %s: value %q is not an integer", key, op, values[0])
		}
		r.complement = true
		switch op {
		case corev1.NodeSelectorOpGt:
			r.gt = &n
		case karpv1.NodeSelectorOpGte:
			if n == math.MinInt64 {
				return Requirement{}, fmt.Errorf("requirement %s %s: value %q: want an integer above the smallest int64", key, op, values[0])
			}
			n--
			r.gt = &n
		case corev1.NodeSelectorOpLt:
			r.lt = &n
		case karpv1.NodeSelectorOpLte:
			if n == math.MaxInt64 {
				return Requirement{}, fmt.Errorf("requirement %s %s: value %q: want an integer below the largest int64", key, op, values[0])
			}
			n++
			r.lt = &n
		}
	default:
		return Requirement{}, fmt.Errorf("requirement %s: unsupported operator %q", key, op)
	}
	return r, nil
}

// MustNew is New for literals in code and tests; it panics on error.
func MustNew(key string, op corev1.NodeSelectorOperator, values ...string) Requirement {
	r, err := New(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

// WithMinValues returns r demanding that many distinct values.
func (r Requirement) WithMinValues(n int) Requirement {
	r.minValues = &n
	return r
}

// Key is the (normalized) label key.
func (r Requirement) Key() string { return r.key }

// MinValues returns the minValues constraint, if any.
func (r Requirement) MinValues() (int, bool) {
	if r.minValues == nil {
		return 0, false
	}
	return *r.minValues, true
}

// Has reports whether a node whose label has value v satisfies r. Integer
// bounds narrow enough to enumerate are kept as the canonical decimal
// values they allow and matched as text, so a non-canonical integer label
// ("01") is not recognised there; numeric labels are written canonically.
func (r Requirement) Has(v string) bool {
	if r.gt != nil || r.lt != nil {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || !r.inBounds(n) {
			return false
		}
	}
	_, listed := slices.BinarySearch(r.values, v)
	return listed != r.complement
}

// AllowsAbsent reports whether a node without the label satisfies r.
func (r Requirement) AllowsAbsent() bool { return r.absentOK }

// Satisfiable reports whether any node (with some value, or without the
// label) satisfies r.
func (r Requirement) Satisfiable() bool {
	return r.absentOK || r.complement || len(r.values) > 0
}

// Values returns the accepted values of a finite requirement (In, or a
// bounded range), and false when the accepted set is infinite.
func (r Requirement) Values() ([]string, bool) {
	if r.complement {
		return nil, false
	}
	return slices.Clone(r.values), true
}

// Single returns the one accepted value of a requirement that accepts
// exactly one value and no absent label, or "".
func (r Requirement) Single() string {
	if r.complement || r.absentOK || len(r.values) != 1 {
		return ""
	}
	return r.values[0]
}

// Intersect returns the requirement met exactly by the nodes that meet both
// r and o. Both must be on the same key.
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{
		key:       r.key,
		absentOK:  r.absentOK && o.absentOK,
		gt:        maxBound(r.gt, o.gt),
		lt:        minBound(r.lt, o.lt),
		minValues: maxInt(r.minValues, o.minValues),
	}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = union(r.values, o.values)
	case r.complement:
		out.values = without(o.values, r.values)
	case o.complement:
		out.values = without(r.values, o.values)
	default:
		out.values = intersection(r.values, o.values)
	}
	out.settleBounds()
	return out
}

// Intersects reports whether some node satisfies both r and o.
func (r Requirement) Intersects(o Requirement) bool {
	return r.Intersect(o).Satisfiable()
}

// settleBounds brings a requirement with integer bounds to its simplest form:
// a finite set keeps only the values within bounds, and a bounded range small
// enough to enumerate becomes a finite set, so that an empty range (Gt 3,
// Lt 4) or a range fully excluded (Gt 1, Lt 3, NotIn [2]) is seen as empty.
func (r *Requirement) settleBounds() {
	if r.gt == nil && r.lt == nil {
		return
	}
	if !r.complement {
		r.values = slices.DeleteFunc(r.values, func(v string) bool {
			n, err := strconv.ParseInt(v, 10, 64)
			return err != nil || !r.inBounds(n)
		})
		r.gt, r.lt = nil, nil
		return
	}
	if r.gt == nil || r.lt == nil {
		return
	}
	// The integers strictly between the bounds, counted without overflow:
	// the bounds may be anywhere in int64.
	var width uint64
	if *r.lt > *r.gt {
		width = uint64(*r.lt) - uint64(*r.gt) - 1
	}
	if width > uint64(len(r.values))+64 {
		return // wide enough that exclusions cannot empty it
	}
	var accepted []string
	for i := uint64(0); i < width; i++ {
		s := strconv.FormatInt(*r.gt+1+int64(i), 10)
		if _, excluded := slices.BinarySearch(r.values, s); !excluded {
			accepted = append(accepted, s)
		}
	}
	slices.Sort(accepted) // values are searched as strings: "10" sorts before "9"
	r.complement, r.values, r.gt, r.lt = false, accepted, nil, nil
}

// equal reports whether two requirements accept exactly the same.
func (r Requirement) equal(o Requirement) bool {
	return r.key == o.key && r.complement == o.complement && r.absentOK == o.absentOK &&
		slices.Equal(r.values, o.values) && eqPtr(r.gt, o.gt) && eqPtr(r.lt, o.lt) && eqPtr(r.minValues, o.minValues)
}

func eqPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func (r Requirement) inBounds(n int64) bool {
	return (r.gt == nil || n > *r.gt) && (r.lt == nil || n < *r.lt)
}

// NodeSelectorRequirements expresses r as node selector requirements (ANDed),
// as written on a NodeClaim. An unsatisfiable requirement becomes In [].
func (r Requirement) NodeSelectorRequirements() []karpv1.NodeSelectorRequirementWithMinValues {
	with := func(op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: r.key, Operator: op, Values: values, MinValues: r.minValues}
	}
	if !r.complement {
		if len(r.values) == 0 && r.absentOK {
			return []karpv1.NodeSelectorRequirementWithMinValues{with(corev1.NodeSelectorOpDoesNotExist)}
		}
		return []karpv1.NodeSelectorRequirementWithMinValues{with(corev1.NodeSelectorOpIn, slices.Clone(r.values)...)}
	}
	// A complement: any value but the listed ones, within the bounds.
	var out []karpv1.NodeSelectorRequirementWithMinValues
	bounded := r.gt != nil || r.lt != nil
	if !bounded && !r.absentOK {
		out = append(out, with(corev1.NodeSelectorOpExists)) // the integer operators already demand presence
	}
	if r.gt != nil {
		out = append(out, with(corev1.NodeSelectorOpGt, strconv.FormatInt(*r.gt, 10)))
	}
	if r.lt != nil {
		out = append(out, with(corev1.NodeSelectorOpLt, strconv.FormatInt(*r.lt, 10)))
	}
	if len(r.values) > 0 {
		out = append(out, with(corev1.NodeSelectorOpNotIn, slices.Clone(r.values)...))
	}
	return out // empty: any value or none, no constraint at all
}

// String renders r for messages, e.g. `karpenter.sh/capacity-type In [spot]`.
func (r Requirement) String() string {
	parts := make([]string, 0, 2)
	for _, nsr := range r.NodeSelectorRequirements() {
		s := fmt.Sprintf("%s %s", nsr.Key, nsr.Operator)
		if len(nsr.Values) > 0 {
			s += " [" + strings.Join(nsr.Values, " ") + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func sortedUnique(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

func union(a, b []string) []string {
	return sortedUnique(append(slices.Clone(a), b...))
}

// intersection merges two sorted lists.
func intersection(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch strings.Compare(a[i], b[j]) {
		case 0:
			out = append(out, a[i])
			i++
			j++
		case -1:
			i++
		default:
			j++
		}
	}
	return out
}

// without returns the values of a not in b (both sorted).
func without(a, b []string) []string {
	var out []string
	for _, v := range a {
		if _, found := slices.BinarySearch(b, v); !found {
			out = append(out, v)
		}
	}
	return out
}

func maxBound(a, b *int64) *int64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}

func minBound(a, b *int64) *int64 {
	if a == nil || (b != nil && *b < *a) {
		return b
	}
	return a
}

func maxInt(a, b *int) *int {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}
