package conformance

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/pkg/catalog"
)

// Theme 6: requirements filter instance types as Karpenter's do.
func TestRequirements(t *testing.T) {
	podWith := func(affinity string) string {
		return `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [` + affinity + `]}]}}}
  containers: [{name: c, image: x, resources: {requests: {cpu: "100m"}}}]
`
	}
	run(t, []tcase{
		{
			name:     "Exists keeps only types that define the label",
			simulate: true,
			upstream: "scheduling/suite_test.go: Well Known Labels: should schedule pods that have node affinity with Exists on a label only some instance types define (special is defined on large types only)",
			yaml:     podWith(`{key: special, operator: Exists}`),
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				if !slices.Equal(nc.InstanceTypeOptions, []string{"arm-instance-type"}) {
					t.Errorf("options %v, want only arm-instance-type, the one large type (special=optional)", nc.InstanceTypeOptions)
				}
			},
		},
		{
			name:     "DoesNotExist keeps only types without the label",
			upstream: "scheduling/suite_test.go: Well Known Labels: should schedule pods that have node affinity with DoesNotExist on a label some instance types define",
			yaml:     podWith(`{key: special, operator: DoesNotExist}`),
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				if slices.Contains(nc.InstanceTypeOptions, "arm-instance-type") {
					t.Errorf("options %v include arm-instance-type, which defines special", nc.InstanceTypeOptions)
				}
			},
		},
		{
			name:     "Exists on a label no type or pool defines leaves the pod pending",
			upstream: "scheduling/suite_test.go: Custom Labels: should not schedule pods that have node selectors with undefined key",
			yaml:     podWith(`{key: example.com/undefined, operator: Exists}`),
			check:    func(t *testing.T, d decision) { expectNotPlaced(t, d, "p") },
		},
		{
			name:     "In on a provider label selects by value",
			upstream: "scheduling/suite_test.go: Well Known Labels: should use well known labels defined by the provider (integer)",
			yaml:     podWith(`{key: integer, operator: In, values: ["16"]}`),
			check: func(t *testing.T, d decision) {
				if nc := d.claimOf("p"); nc == nil || nc.InstanceType != "arm-instance-type" {
					t.Errorf("want arm-instance-type (16 CPU) for integer In [16], got %+v", nc)
				}
			},
		},
		{
			name:     "Gt and Lt on a provider label",
			simulate: true,
			upstream: "scheduling/suite_test.go: Well Known Labels: should schedule with Gt/Lt on integer labels",
			yaml:     podWith(`{key: integer, operator: Gt, values: ["2"]}, {key: integer, operator: Lt, values: ["10"]}`),
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				for _, o := range nc.InstanceTypeOptions {
					if o == "small-instance-type" || o == "arm-instance-type" {
						t.Errorf("options %v include %s (2 or 16 CPU) for 2 < integer < 10", nc.InstanceTypeOptions, o)
					}
				}
			},
		},
		{
			name:          "a label the pool stamps on every node does not narrow the types",
			upstream:      "scheduling/suite_test.go: Custom Labels: should schedule pods with a node selector on a label the NodePool template defines",
			catalog:       tieredCatalog(),
			noDefaultPool: true,
			yaml: strings.Replace(defaultPool, "spec:\n  template:\n    spec:", "spec:\n  template:\n    metadata: {labels: {tier: gold}}\n    spec:", 1) + `
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeSelector: {tier: gold}
  containers: [{name: c, image: x, resources: {requests: {cpu: "100m"}}}]
`,
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				if nc.InstanceType != "small-instance-type" {
					t.Errorf("launches %s, want the cheapest, small-instance-type: the pool labels every node tier=gold", nc.InstanceType)
				}
			},
		},
	})
}

// tieredCatalog: the fake catalog where only default-instance-type carries
// a tier label.
func tieredCatalog() []catalog.InstanceType {
	types := FakeCatalog()
	for i := range types {
		if types[i].Name == "default-instance-type" {
			types[i].Labels["tier"] = "gold"
		}
	}
	return types
}
