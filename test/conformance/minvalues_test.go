package conformance

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/sched"
)

// minValuesPool is the default pool with a requirement on instance types
// carrying minValues, and optional limits.
func minValuesPool(types string, minValues int, limits string) string {
	return strings.Replace(defaultPool, "      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]",
		"      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: ["+types+"], minValues: "+strconv.Itoa(minValues)+"}]", 1) + limits
}

const threeCPUPod = `
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
`

// Theme 8: minValues.
func TestMinValues(t *testing.T) {
	three := "default-instance-type, small-instance-type, arm-instance-type"
	run(t, []tcase{
		{
			name:          "Strict: a claim that cannot meet minValues is not made",
			simulate:      true,
			upstream:      "scheduling/instance_selection_test.go: MinValues: should not schedule if the minValues requirement is not met (Strict)",
			noDefaultPool: true,
			yaml:          minValuesPool(three, 3, "") + threeCPUPod,
			check:         func(t *testing.T, d decision) { expectNotPlaced(t, d, "p") },
		},
		{
			name:          "BestEffort: the claim carries the number of values reached",
			simulate:      true,
			upstream:      "scheduling/instance_selection_test.go: MinValues: should relax minValues to what the instance types offer and annotate the NodeClaim (BestEffort)",
			noDefaultPool: true,
			policy:        sched.MinValuesBestEffort,
			yaml:          minValuesPool(three, 3, "") + threeCPUPod,
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				r := requirement(nc, "node.kubernetes.io/instance-type")
				if r == nil || r.MinValues == nil || *r.MinValues != 2 {
					t.Errorf("instance-type requirement %+v, want minValues rewritten to 2 (default and arm hold 3 CPU)", r)
				}
				if !nc.MinValuesRelaxed {
					t.Error("claim not marked relaxed")
				}
			},
		},
		{
			name:          "Strict: limits that trim the options below minValues leave the pod pending",
			simulate:      true,
			upstream:      "scheduling/instance_selection_test.go: MinValues: should not schedule when the nodepool's limits leave fewer instance types than minValues (Strict)",
			noDefaultPool: true,
			yaml:          minValuesPool("default-instance-type, arm-instance-type", 2, "  limits: {cpu: \"5\"}\n") + onePod,
			check: func(t *testing.T, d decision) {
				expectNotPlaced(t, d, "p")
				for _, nc := range d.NodeClaims {
					t.Errorf("claim made with options %v (relaxed %v): arm-instance-type passes the 5 CPU limit, so only one type is left for minValues 2", nc.InstanceTypeOptions, nc.MinValuesRelaxed)
				}
			},
		},
		{
			name:          "met minValues is written as asked",
			upstream:      "scheduling/instance_selection_test.go: MinValues: should schedule respecting the minValues from the NodePool",
			noDefaultPool: true,
			yaml:          minValuesPool(three, 2, "") + onePod,
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
				}
				if r := requirement(nc, "node.kubernetes.io/instance-type"); r == nil || r.MinValues == nil || *r.MinValues != 2 || nc.MinValuesRelaxed {
					t.Errorf("instance-type requirement %+v relaxed %v, want minValues 2 unrelaxed", r, nc.MinValuesRelaxed)
				}
				if len(nc.InstanceTypeOptions) < 2 {
					t.Errorf("options %v: fewer than minValues", nc.InstanceTypeOptions)
				}
			},
		},
	})
}
