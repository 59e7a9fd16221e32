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
		{
			name:          "Strict: pods drawn by a claim that is not made are not placed either",
			upstream:      "scheduling/instance_selection_test.go: MinValues: should not schedule pods whose affinity targets could not be scheduled under minValues (Strict)",
			noDefaultPool: true,
			yaml: strings.Replace(minValuesPool("default-instance-type, arm-instance-type", 2, "  limits: {cpu: \"20\"}\n  weight: 10\n"),
				"kind: NodePool\nmetadata: {name: default}", "kind: NodePool\nmetadata: {name: lim}", 1) + `
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: free}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: v1
kind: Pod
metadata: {name: first}
spec:
  nodeSelector: {karpenter.sh/nodepool: lim}
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: target, labels: {app: target}}
spec:
  nodeSelector: {karpenter.sh/nodepool: lim, topology.kubernetes.io/zone: test-zone-2}
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  nodeSelector: {karpenter.sh/nodepool: free}
  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: target}}}]}}
  containers: [{name: c, image: x, resources: {requests: {cpu: "100m"}}}]
`,
			check: func(t *testing.T, d decision) {
				// 20 CPU: first's claim keeps both types (4 and 16 CPU), which
				// leaves 4 for target's: one type, short of minValues 2.
				expectPlaced(t, d, "first")
				expectNotPlaced(t, d, "target", "x")
			},
		},
	})
}
