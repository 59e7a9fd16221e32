package requirement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

const absent = "<absent>"

// satisfies is the definition a node label state is checked against.
func satisfies(r Requirement, v string) bool {
	if v == absent {
		return r.AllowsAbsent()
	}
	return r.Has(v)
}

func TestOperators(t *testing.T) {
	cases := []struct {
		op     corev1.NodeSelectorOperator
		values []string
		accept []string
		reject []string
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, []string{"a", "b"}, []string{"c", "", absent}},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, []string{"b", absent}, []string{"a"}},
		{corev1.NodeSelectorOpExists, nil, []string{"a", "7", ""}, []string{absent}},
		{corev1.NodeSelectorOpDoesNotExist, nil, []string{absent}, []string{"a", "7"}},
		{corev1.NodeSelectorOpGt, []string{"3"}, []string{"4", "100"}, []string{"3", "-1", "x", absent}},
		{karpv1.NodeSelectorOpGte, []string{"3"}, []string{"3", "4"}, []string{"2", absent}},
		{corev1.NodeSelectorOpLt, []string{"3"}, []string{"2", "-5"}, []string{"3", "x", absent}},
		{karpv1.NodeSelectorOpLte, []string{"3"}, []string{"3", "0"}, []string{"4", absent}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %v", c.op, c.values), func(t *testing.T) {
			r, err := New("k", c.op, c.values...)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range c.accept {
				if !satisfies(r, v) {
					t.Errorf("%s rejects %q", r, v)
				}
			}
			for _, v := range c.reject {
				if satisfies(r, v) {
					t.Errorf("%s accepts %q", r, v)
				}
			}
		})
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	cases := []struct {
		op     corev1.NodeSelectorOperator
		values []string
	}{
		{corev1.NodeSelectorOpGt, []string{"1", "2"}},
		{corev1.NodeSelectorOpGt, nil},
		{corev1.NodeSelectorOpLt, []string{"three"}},
		{karpv1.NodeSelectorOpGte, []string{"1.5"}},
		{"Equals", []string{"a"}},
	}
	for _, c := range cases {
		if r, err := New("karpenter.k8s.aws/instance-cpu", c.op, c.values...); err == nil {
			t.Errorf("%s %v: accepted as %s", c.op, c.values, r)
		} else if !strings.Contains(err.Error(), "karpenter.k8s.aws/instance-cpu") {
			t.Errorf("the error does not name the key: %v", err)
		}
	}
}

func TestBetaKeysAreNormalized(t *testing.T) {
	r := MustNew("failure-domain.beta.kubernetes.io/zone", corev1.NodeSelectorOpIn, "us-east-1a")
	if r.Key() != corev1.LabelTopologyZone {
		t.Errorf("key %s, want %s", r.Key(), corev1.LabelTopologyZone)
	}
	rs := NewRequirements(r, MustNew(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"))
	if got, _ := rs.Get("failure-domain.beta.kubernetes.io/zone"); got.Satisfiable() {
		t.Errorf("beta and GA zone requirements were not intersected: %s", got)
	}
}

func TestIntersects(t *testing.T) {
	req := func(op corev1.NodeSelectorOperator, values ...string) Requirement { return MustNew("k", op, values...) }
	cases := []struct {
		name string
		a, b Requirement
		want bool
	}{
		{"disjoint In", req("In", "a"), req("In", "b"), false},
		{"overlapping In", req("In", "a", "b"), req("In", "b", "c"), true},
		{"In excluded by NotIn", req("In", "a"), req("NotIn", "a"), false},
		{"NotIn and DoesNotExist meet on an absent label", req("NotIn", "a"), req("DoesNotExist"), true},
		{"Exists and DoesNotExist", req("Exists"), req("DoesNotExist"), false},
		{"In and DoesNotExist", req("In", "a"), req("DoesNotExist"), false},
		{"two NotIn", req("NotIn", "a"), req("NotIn", "b"), true},
		{"empty integer range", req("Gt", "3"), req("Lt", "4"), false},
		{"one-value integer range", req("Gte", "4"), req("Lte", "4"), true},
		{"integer range fully excluded", req("Gt", "1"), req("Lt", "3"), false}, // see below: NotIn 2 added
		{"Gt against In with one fitting value", req("Gt", "3"), req("In", "2", "4"), true},
		{"Gt against In with no integer", req("Gt", "3"), req("In", "large"), false},
		{"Gt against DoesNotExist", req("Gt", "3"), req("DoesNotExist"), false},
	}
	cases[9].a = cases[9].a.Intersect(req("NotIn", "2"))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.Intersects(c.b); got != c.want {
				t.Errorf("%s ∩ %s: Intersects = %v, want %v", c.a, c.b, got, c.want)
			}
			if got := c.b.Intersects(c.a); got != c.want {
				t.Errorf("not symmetric: %s ∩ %s = %v", c.b, c.a, got)
			}
		})
	}
	if got, _ := req("Gte", "4").Intersect(req("Lte", "4")).Values(); !slices.Equal(got, []string{"4"}) {
		t.Errorf("Gte 4 ∩ Lte 4 = %v, want [4]", got)
	}
}

// randomRequirement draws from a small universe so that brute force covers
// every interesting overlap.
func randomRequirement(rng *rand.Rand) Requirement {
	ops := []corev1.NodeSelectorOperator{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"}
	op := ops[rng.IntN(len(ops))]
	switch op {
	case "Exists", "DoesNotExist":
		return MustNew("k", op)
	case "Gt", "Lt", "Gte", "Lte":
		return MustNew("k", op, strconv.Itoa(rng.IntN(8)))
	}
	universe := []string{"0", "1", "2", "3", "4", "5", "6", "7", "a", "b"}
	var values []string
	for range 1 + rng.IntN(3) {
		values = append(values, universe[rng.IntN(len(universe))])
	}
	return MustNew("k", op, values...)
}

// Intersect must mean "both": for every label state, the intersection
// accepts it exactly when both sides do; Intersects must agree with brute
// force whenever the answer can be found in the universe.
func TestIntersectMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	universe := []string{absent, "a", "b", "c", "x"}
	for n := -3; n <= 12; n++ {
		universe = append(universe, strconv.Itoa(n))
	}
	for i := range 20000 {
		parts := make([]Requirement, 2+rng.IntN(2))
		for j := range parts {
			parts[j] = randomRequirement(rng)
		}
		got := parts[0]
		for _, p := range parts[1:] {
			got = got.Intersect(p)
		}
		found := false
		for _, v := range universe {
			want := true
			for _, p := range parts {
				want = want && satisfies(p, v)
			}
			if satisfies(got, v) != want {
				t.Fatalf("case %d: %v intersected to %s, which gives %q %v, want %v", i, parts, got, v, !want, want)
			}
			found = found || want
		}
		_, finite := got.Values()
		if got.Satisfiable() && !found && finite {
			t.Fatalf("case %d: %v intersected to %s: satisfiable, but no value fits", i, parts, got)
		}
		if !got.Satisfiable() && found {
			t.Fatalf("case %d: %v intersected to %s: unsatisfiable, but a value fits", i, parts, got)
		}
	}
}

// Writing a requirement onto a NodeClaim and reading it back must not change
// what it accepts.
func TestNodeSelectorRequirementsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	universe := []string{absent, "a", "b", "x", "-1", "0", "1", "2", "3", "4", "5", "6", "7", "8"}
	for i := range 5000 {
		r := randomRequirement(rng).Intersect(randomRequirement(rng))
		if !r.Satisfiable() {
			continue
		}
		back, err := FromAPI(r.NodeSelectorRequirements())
		if err != nil {
			t.Fatalf("case %d: %s rendered to %v, which does not parse: %v", i, r, r.NodeSelectorRequirements(), err)
		}
		got, ok := back.Get("k")
		for _, v := range universe {
			want := satisfies(r, v)
			has := !ok || satisfies(got, v) // no requirement at all accepts everything
			if has != want {
				t.Fatalf("case %d: %s rendered as %v accepts %q = %v, want %v", i, r, r.NodeSelectorRequirements(), v, has, want)
			}
		}
	}
}

func TestMinValuesIntersectToTheLargest(t *testing.T) {
	a := MustNew("k", "In", "a", "b", "c").WithMinValues(2)
	b := MustNew("k", "Exists").WithMinValues(3)
	if n, ok := a.Intersect(b).MinValues(); !ok || n != 3 {
		t.Errorf("minValues = %d, %v; want 3", n, ok)
	}
	rs, err := FromAPI([]karpv1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: "In", Values: []string{"a", "b"}, MinValues: ptr(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Get("k"); r.minValues == nil || *r.minValues != 2 {
		t.Errorf("FromAPI dropped minValues: %+v", r)
	}
}

func ptr[T any](v T) *T { return &v }
