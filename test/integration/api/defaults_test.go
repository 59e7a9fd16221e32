//go:build integration

package api_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const minimalNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

const minimalNodeClaim = `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: %s
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
`

const minimalEC2NodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: %s
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-test
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
`

func field(t *testing.T, obj *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s has no %v (err %v)", obj.GetName(), path, err)
	}
	return v
}

func TestDefaultsAreApplied(t *testing.T) {
	ctx := context.Background()

	t.Run("NodePool", func(t *testing.T) {
		got := mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalNodePool, "defaults")))
		checks := []struct {
			path []string
			want string
		}{
			{[]string{"spec", "disruption", "consolidationPolicy"}, "WhenEmptyOrUnderutilized"},
			{[]string{"spec", "disruption", "consolidateAfter"}, "0s"},
			{[]string{"spec", "disruption", "budgets"}, "[map[nodes:10%]]"},
			{[]string{"spec", "template", "spec", "expireAfter"}, "720h"},
		}
		for _, c := range checks {
			if got := fmt.Sprint(field(t, got, c.path...)); got != c.want {
				t.Errorf("%v defaulted to %s, want %s", c.path, got, c.want)
			}
		}
	})

	t.Run("NodePool with a partial disruption block", func(t *testing.T) {
		np := parse(t, fmt.Sprintf(minimalNodePool, "defaults-partial"))
		setPath(t, np.Object, "spec.disruption", `{consolidationPolicy: WhenEmpty}`)
		got := mustCreate(ctx, t, np)
		if v := fmt.Sprint(field(t, got, "spec", "disruption", "consolidateAfter")); v != "0s" {
			t.Errorf("consolidateAfter defaulted to %s, want 0s", v)
		}
		if v := fmt.Sprint(field(t, got, "spec", "disruption", "budgets")); v != "[map[nodes:10%]]" {
			t.Errorf("budgets defaulted to %s, want [{nodes: 10%%}]", v)
		}
		if v := fmt.Sprint(field(t, got, "spec", "disruption", "consolidationPolicy")); v != "WhenEmpty" {
			t.Errorf("consolidationPolicy became %s, want the WhenEmpty the user wrote", v)
		}
	})

	t.Run("NodePool keeps Never", func(t *testing.T) {
		np := parse(t, fmt.Sprintf(minimalNodePool, "defaults-never"))
		setPath(t, np.Object, "spec.disruption", `{consolidateAfter: Never}`)
		setPath(t, np.Object, "spec.template.spec.expireAfter", `Never`)
		got := mustCreate(ctx, t, np)
		if v := fmt.Sprint(field(t, got, "spec", "disruption", "consolidateAfter")); v != "Never" {
			t.Errorf("consolidateAfter stored as %s, want Never", v)
		}
		if v := fmt.Sprint(field(t, got, "spec", "template", "spec", "expireAfter")); v != "Never" {
			t.Errorf("expireAfter stored as %s, want Never", v)
		}
	})

	t.Run("NodeClaim", func(t *testing.T) {
		got := mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalNodeClaim, "defaults")))
		if v := fmt.Sprint(field(t, got, "spec", "expireAfter")); v != "720h" {
			t.Errorf("expireAfter defaulted to %s, want 720h", v)
		}
	})

	t.Run("EC2NodeClass", func(t *testing.T) {
		got := mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalEC2NodeClass, "defaults")))
		want := "map[httpEndpoint:enabled httpProtocolIPv6:disabled httpPutResponseHopLimit:1 httpTokens:required]"
		if v := fmt.Sprint(field(t, got, "spec", "metadataOptions")); v != want {
			t.Errorf("metadataOptions defaulted to %s, want %s", v, want)
		}
	})
}
