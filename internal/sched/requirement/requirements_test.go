package requirement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func reqs(t *testing.T, terms ...corev1.NodeSelectorRequirement) Requirements {
	t.Helper()
	rs, err := FromNodeSelector(terms)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func nsr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestCompatible(t *testing.T) {
	wellKnown := map[string]bool{corev1.LabelTopologyZone: true, corev1.LabelArchStable: true}
	template := reqs(t,
		nsr(corev1.LabelArchStable, "In", "amd64", "arm64"),
		nsr("node-type", "In", "general"),
	)
	cases := []struct {
		name    string
		pod     Requirements
		wantErr string // empty: compatible
	}{
		{"pod asks nothing", Requirements{}, ""},
		{"pod narrows a defined key", reqs(t, nsr(corev1.LabelArchStable, "In", "arm64")), ""},
		{"pod selects a template label", reqs(t, nsr("node-type", "In", "general", "stable")), ""},
		{"pod asks a well-known key the template leaves open", reqs(t, nsr(corev1.LabelTopologyZone, "In", "us-east-1a")), ""},
		{"pod asks an unknown custom label", reqs(t, nsr("team", "In", "payments")), `label "team" does not have known values`},
		{"pod asks a custom label to exist", reqs(t, nsr("team", "Exists")), `label "team" does not have known values`},
		{"pod excludes a custom label value", reqs(t, nsr("team", "NotIn", "payments")), ""},
		{"pod asks a custom label be absent", reqs(t, nsr("team", "DoesNotExist")), ""},
		{"pod conflicts on arch", reqs(t, nsr(corev1.LabelArchStable, "In", "s390x")), "kubernetes.io/arch In [s390x] conflicts with kubernetes.io/arch In [amd64 arm64]"},
		{"pod conflicts on a template label", reqs(t, nsr("node-type", "In", "stable")), "node-type In [stable] conflicts"},
		{"pod forbids a template label", reqs(t, nsr("node-type", "DoesNotExist")), "node-type DoesNotExist conflicts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := template.Compatible(c.pod, wellKnown)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("incompatible: %v", err)
			case c.wantErr != "" && err == nil:
				t.Errorf("compatible, want %q", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Errorf("error %q does not say %q", err, c.wantErr)
			}
		})
	}
}

func TestMatchesLabels(t *testing.T) {
	rs := reqs(t,
		nsr("karpenter.k8s.aws/instance-generation", "Gt", "3"),
		nsr("karpenter.k8s.aws/instance-size", "NotIn", "nano", "metal"),
		nsr(corev1.LabelOSStable, "In", "linux"),
	)
	cases := []struct {
		labels  map[string]string
		wantErr string
	}{
		{map[string]string{"karpenter.k8s.aws/instance-generation": "6", "karpenter.k8s.aws/instance-size": "large", corev1.LabelOSStable: "linux"}, ""},
		{map[string]string{"karpenter.k8s.aws/instance-generation": "6", corev1.LabelOSStable: "linux"}, ""}, // NotIn accepts an absent label
		{map[string]string{"karpenter.k8s.aws/instance-generation": "3", corev1.LabelOSStable: "linux"}, "instance-generation=3 does not satisfy"},
		{map[string]string{"karpenter.k8s.aws/instance-generation": "6", "karpenter.k8s.aws/instance-size": "metal", corev1.LabelOSStable: "linux"}, "instance-size=metal"},
		{map[string]string{"karpenter.k8s.aws/instance-generation": "6"}, `label "kubernetes.io/os" is missing`},
	}
	for _, c := range cases {
		err := rs.Matches(c.labels)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: %v", c.labels, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: got %v, want %q", c.labels, err, c.wantErr)
		}
	}
}

func TestAddIntersectsAndCloneIsIndependent(t *testing.T) {
	rs := reqs(t, nsr("k", "In", "a", "b", "c"))
	clone := rs.Clone()
	rs.Add(MustNew("k", "NotIn", "a"))
	if got, _ := rs.Get("k"); got.Has("a") || !got.Has("b") {
		t.Errorf("Add did not intersect: %s", got)
	}
	if got, _ := clone.Get("k"); !got.Has("a") {
		t.Errorf("the clone changed with the original: %s", got)
	}
	merged := reqs(t, nsr("x", "Exists"))
	merged.AddAll(rs)
	if merged.Len() != 2 || !merged.Has("k") {
		t.Errorf("AddAll = %s", merged)
	}
}

func TestFromLabels(t *testing.T) {
	offered := FromLabels(map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64"})
	asked := reqs(t, nsr("beta.kubernetes.io/instance-type", "In", "m5.large", "m5.xlarge"))
	if err := offered.Intersects(asked); err != nil {
		t.Errorf("labels and a beta-keyed selector for the same type do not intersect: %v", err)
	}
	if err := offered.Matches(map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64"}); err != nil {
		t.Error(err)
	}
}
