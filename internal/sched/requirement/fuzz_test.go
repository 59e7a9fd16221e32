package requirement

import (
	"math"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// splitValues turns a fuzzed string into operator values: "" is none,
// otherwise comma-separated (empty values included).
func splitValues(s string) []string {
	if s == "" {
		return nil
	}
	values := strings.Split(s, ",")
	if len(values) > 64 {
		values = values[:64]
	}
	return values
}

// model says whether a node with label value v (or none, when present is
// false) satisfies "op values", straight from the operators' definitions:
// the reference the parsed requirement is checked against.
func model(op corev1.NodeSelectorOperator, values []string, v string, present bool) bool {
	listed := false
	for _, x := range values {
		listed = listed || x == v
	}
	switch op {
	case corev1.NodeSelectorOpIn:
		return present && listed
	case corev1.NodeSelectorOpNotIn:
		return !present || !listed
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	}
	if !present {
		return false
	}
	n, err1 := strconv.ParseInt(v, 10, 64)
	bound, err2 := strconv.ParseInt(values[0], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	switch op {
	case corev1.NodeSelectorOpGt:
		return n > bound
	case corev1.NodeSelectorOpLt:
		return n < bound
	case karpv1.NodeSelectorOpGte:
		return n >= bound
	case karpv1.NodeSelectorOpLte:
		return n <= bound
	}
	return false
}

// nonCanonicalInt reports whether v parses as an integer but is not
// written the way strconv.FormatInt writes it.
func nonCanonicalInt(v string) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && strconv.FormatInt(n, 10) != v
}

// probes are label values worth asking a requirement about: its values,
// their integer neighbours, the int64 extremes and a non-integer.
func probes(lists ...[]string) []string {
	out := []string{"", "x", strconv.FormatInt(math.MinInt64, 10), strconv.FormatInt(math.MaxInt64, 10), "0"}
	for _, values := range lists {
		for _, v := range values {
			out = append(out, v)
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				if n > math.MinInt64 {
					out = append(out, strconv.FormatInt(n-1, 10))
				}
				if n < math.MaxInt64 {
					out = append(out, strconv.FormatInt(n+1, 10))
				}
			}
		}
	}
	return out
}

// FuzzRequirementAlgebra parses two requirements on one key from random
// operators and values and checks the algebra the solver relies on: each
// accepts exactly what its operator means, the intersection accepts
// exactly what both accept and is commutative, a satisfiable requirement
// is compatible with itself, and a requirement survives the round trip
// through the NodeClaim form. Bad operators or values are errors, never
// panics.
func FuzzRequirementAlgebra(f *testing.F) {
	seeds := []struct{ op1, v1, op2, v2 string }{
		{"In", "spot,on-demand", "NotIn", "spot"},
		{"In", "us-east-1a,us-east-1b", "In", "us-east-1b,us-east-1c"},
		{"Exists", "", "DoesNotExist", ""},
		{"NotIn", "a", "DoesNotExist", ""},
		{"Gt", "3", "Lt", "4"},
		{"Gt", "1", "NotIn", "2"},
		{"Gte", "4", "Lte", "16"},
		{"Gt", "2", "In", "1,2,3,x"},
		{"Gt", "-9223372036854775808", "Lt", "9223372036854775807"},
		{"Gt", "9223372036854775807", "Lt", "0"},
		{"Gte", "-9223372036854775808", "Exists", ""},
		{"Lte", "9223372036854775807", "In", "5"},
		{"Lt", "x", "In", ""},
		{"Bogus", "a", "In", "a"},
	}
	for _, s := range seeds {
		f.Add("karpenter.k8s.aws/instance-cpu", s.op1, s.v1, s.op2, s.v2)
	}
	f.Fuzz(func(t *testing.T, key, op1, values1, op2, values2 string) {
		o1, o2 := corev1.NodeSelectorOperator(op1), corev1.NodeSelectorOperator(op2)
		vs1, vs2 := splitValues(values1), splitValues(values2)
		a, errA := New(key, o1, vs1...)
		b, errB := New(key, o2, vs2...)
		if errA != nil || errB != nil {
			return
		}
		ab, ba := a.Intersect(b), b.Intersect(a)
		if !ab.equal(ba) {
			t.Fatalf("(%s) ∩ (%s) = %s, but the other way round %s", a, b, ab, ba)
		}
		if a.Intersects(b) != b.Intersects(a) {
			t.Fatalf("(%s) intersects (%s): %v one way, %v the other", a, b, a.Intersects(b), b.Intersects(a))
		}
		if a.Intersects(a) != a.Satisfiable() {
			t.Fatalf("(%s) intersects itself: %v, satisfiable: %v", a, a.Intersects(a), a.Satisfiable())
		}
		if err := NewRequirements(a).Compatible(NewRequirements(a), nil); (err == nil) != a.Satisfiable() {
			t.Fatalf("(%s) compatible with itself: %v, satisfiable: %v", a, err, a.Satisfiable())
		}
		roundTrip, err := FromAPI(a.NodeSelectorRequirements())
		if err != nil {
			t.Fatalf("(%s) as NodeClaim requirements %v does not parse back: %v", a, a.NodeSelectorRequirements(), err)
		}
		back, ok := roundTrip.Get(a.Key())
		if !ok {
			back = Requirement{key: a.Key(), complement: true, absentOK: true} // no constraint at all
		}
		check := func(what string, got bool, want bool) {
			t.Helper()
			if got != want {
				t.Fatalf("%s: got %v, want %v (a = %s %v, b = %s %v)", what, got, want, op1, vs1, op2, vs2)
			}
		}
		check("a accepts an absent label", a.AllowsAbsent(), model(o1, vs1, "", false))
		check("a ∩ b accepts an absent label", ab.AllowsAbsent(), a.AllowsAbsent() && b.AllowsAbsent())
		check("the round trip of a accepts an absent label", back.AllowsAbsent(), a.AllowsAbsent())
		anyAccepted := ab.AllowsAbsent()
		for _, v := range probes(vs1, vs2) {
			if nonCanonicalInt(v) {
				// "01", "+1", "-0": label values that parse as integers but
				// are not written canonically. A narrow range is enumerated
				// as canonical integers and then matched as text, so such a
				// value is outside what the algebra promises (every numeric
				// label Karpenter and the providers write is canonical).
				continue
			}
			check("a accepts "+strconv.Quote(v), a.Has(v), model(o1, vs1, v, true))
			check("b accepts "+strconv.Quote(v), b.Has(v), model(o2, vs2, v, true))
			check("a ∩ b accepts "+strconv.Quote(v), ab.Has(v), a.Has(v) && b.Has(v))
			check("the round trip of a accepts "+strconv.Quote(v), back.Has(v), a.Has(v))
			anyAccepted = anyAccepted || ab.Has(v)
		}
		if anyAccepted && !ab.Satisfiable() {
			t.Fatalf("(%s) ∩ (%s) = %s says it is unsatisfiable but accepts a probe", a, b, ab)
		}
		_ = ab.String()
	})
}
