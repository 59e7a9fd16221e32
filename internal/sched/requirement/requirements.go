package requirement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Normalize maps a beta label key to its GA name (e.g.
// failure-domain.beta.kubernetes.io/zone to topology.kubernetes.io/zone) and
// returns any other key unchanged.
func Normalize(key string) string {
	if ga, ok := karpv1.NormalizedLabels[key]; ok {
		return ga
	}
	return key
}

// Requirements is a conjunction of requirements, at most one per label key.
// The zero value is empty and ready to use; it is not safe for concurrent
// writes.
type Requirements struct {
	byKey map[string]Requirement
}

// NewRequirements returns the conjunction of reqs; requirements on the same
// key are intersected.
func NewRequirements(reqs ...Requirement) Requirements {
	var rs Requirements
	rs.Add(reqs...)
	return rs
}

// FromNodeSelector converts node selector requirements (ANDed, as within one
// node selector term).
func FromNodeSelector(reqs []corev1.NodeSelectorRequirement) (Requirements, error) {
	var rs Requirements
	for _, nsr := range reqs {
		if err := rs.add(nsr.Key, nsr.Operator, nsr.Values, nil); err != nil {
			return Requirements{}, err
		}
	}
	return rs, nil
}

// add parses one requirement and intersects it in.
func (rs *Requirements) add(key string, op corev1.NodeSelectorOperator, values []string, minValues *int) error {
	r, err := New(key, op, values...)
	if err != nil {
		return err
	}
	if minValues != nil {
		r = r.WithMinValues(*minValues)
	}
	rs.Add(r)
	return nil
}

// FromAPI converts NodePool or NodeClaim requirements, keeping minValues.
func FromAPI(reqs []karpv1.NodeSelectorRequirementWithMinValues) (Requirements, error) {
	var rs Requirements
	for _, nsr := range reqs {
		if err := rs.add(nsr.Key, nsr.Operator, nsr.Values, nsr.MinValues); err != nil {
			return Requirements{}, err
		}
	}
	return rs, nil
}

// FromLabels turns labels into single-value In requirements: what a node, an
// instance type or a template label set offers.
func FromLabels(labels map[string]string) Requirements {
	var rs Requirements
	for k, v := range labels {
		rs.Add(MustNew(k, corev1.NodeSelectorOpIn, v))
	}
	return rs
}

// Add intersects each requirement into the set.
func (rs *Requirements) Add(reqs ...Requirement) {
	if rs.byKey == nil {
		rs.byKey = make(map[string]Requirement, len(reqs))
	}
	for _, r := range reqs {
		if existing, ok := rs.byKey[r.key]; ok {
			r = existing.Intersect(r)
		}
		rs.byKey[r.key] = r
	}
}

// SetMinValues replaces the minValues of the requirement on key (Add keeps
// the larger of two), or removes it when n < 1; a key the set does not
// constrain is left alone.
func (rs *Requirements) SetMinValues(key string, n int) {
	r, ok := rs.byKey[Normalize(key)]
	if !ok {
		return
	}
	if n < 1 {
		r.minValues = nil
	} else {
		r = r.WithMinValues(n)
	}
	rs.byKey[r.key] = r
}

// AddAll intersects every requirement of o into the set.
func (rs *Requirements) AddAll(o Requirements) {
	for _, k := range o.Keys() {
		rs.Add(o.byKey[k])
	}
}

// Clone returns an independent copy.
func (rs Requirements) Clone() Requirements {
	return Requirements{byKey: maps.Clone(rs.byKey)}
}

// Get returns the requirement on key, if the set has one.
func (rs Requirements) Get(key string) (Requirement, bool) {
	r, ok := rs.byKey[Normalize(key)]
	return r, ok
}

// Has reports whether the set constrains key.
func (rs Requirements) Has(key string) bool {
	_, ok := rs.byKey[Normalize(key)]
	return ok
}

// MinValues returns the keys that carry a minValues constraint, and their
// minimum.
func (rs Requirements) MinValues() map[string]int {
	var out map[string]int
	for k, r := range rs.byKey {
		if n, ok := r.MinValues(); ok {
			if out == nil {
				out = map[string]int{}
			}
			out[k] = n
		}
	}
	return out
}

// Unsatisfiable returns the keys no label value (nor its absence) can
// satisfy, sorted.
func (rs Requirements) Unsatisfiable() []string {
	var out []string
	for _, k := range rs.Keys() {
		if !rs.byKey[k].Satisfiable() {
			out = append(out, k)
		}
	}
	return out
}

// Keys returns the constrained keys in sorted order.
func (rs Requirements) Keys() []string {
	return slices.Sorted(maps.Keys(rs.byKey))
}

// Len is the number of constrained keys.
func (rs Requirements) Len() int { return len(rs.byKey) }

// Intersects returns nil when some node can satisfy both sets: on every key
// both constrain, the two requirements intersect. Keys only one side
// constrains are not checked (see Compatible).
func (rs Requirements) Intersects(o Requirements) error {
	small, large := rs, o
	if len(o.byKey) < len(rs.byKey) {
		small, large = o, rs
	}
	var conflicts []string
	for k, a := range small.byKey {
		b, ok := large.byKey[k]
		if !ok || a.Intersects(b) {
			continue
		}
		mine, theirs := rs.byKey[k], o.byKey[k]
		conflicts = append(conflicts, fmt.Sprintf("%s conflicts with %s", theirs, mine))
	}
	if len(conflicts) == 0 {
		return nil
	}
	slices.Sort(conflicts)
	return fmt.Errorf("%s", strings.Join(conflicts, "; "))
}

// Covers reports whether rs already implies o: adding o to rs would change
// nothing. It is the cheap test that lets a solver skip re-filtering.
func (rs Requirements) Covers(o Requirements) bool {
	for k, b := range o.byKey {
		a, ok := rs.byKey[k]
		if !ok || !a.Intersect(b).equal(a) {
			return false
		}
	}
	return true
}

// Compatible returns nil when a node meeting rs can also meet o, where rs
// describes what is offered (a NodePool's template, an instance type) and o
// what is asked (a pod). A key o constrains but rs does not must either be
// well known (a provider will define it, e.g. zone) or be satisfiable by a
// node without the label (NotIn, DoesNotExist): nothing offered gives it a
// value.
func (rs Requirements) Compatible(o Requirements, wellKnown map[string]bool) error {
	var undefined []string
	for k, r := range o.byKey {
		if _, ok := rs.byKey[k]; ok || wellKnown[k] || r.AllowsAbsent() {
			continue
		}
		undefined = append(undefined, k)
	}
	if len(undefined) > 0 {
		slices.Sort(undefined)
		return fmt.Errorf("label %q does not have known values", strings.Join(undefined, `", "`))
	}
	return rs.Intersects(o)
}

// Matches returns nil when a node with these labels satisfies every
// requirement.
func (rs Requirements) Matches(labels map[string]string) error {
	for _, k := range rs.Keys() {
		r := rs.byKey[k]
		v, ok := labels[k]
		switch {
		case !ok && !r.AllowsAbsent():
			return fmt.Errorf("label %q is missing; want %s", k, r)
		case ok && !r.Has(v):
			return fmt.Errorf("label %s=%s does not satisfy %s", k, v, r)
		}
	}
	return nil
}

// NodeSelectorRequirements renders the set as NodeClaim requirements, sorted
// by key.
func (rs Requirements) NodeSelectorRequirements() []karpv1.NodeSelectorRequirementWithMinValues {
	var out []karpv1.NodeSelectorRequirementWithMinValues
	for _, k := range rs.Keys() {
		out = append(out, rs.byKey[k].NodeSelectorRequirements()...)
	}
	return out
}

// String renders the set for messages.
func (rs Requirements) String() string {
	parts := make([]string, 0, len(rs.byKey))
	for _, k := range rs.Keys() {
		parts = append(parts, rs.byKey[k].String())
	}
	return strings.Join(parts, ", ")
}
