package conformance

import (
	"slices"
	"testing"
)

// Theme 1: pods are read as kube-apiserver stores them, so a container
// that sets only limits requests its limits.
func TestPodDefaulting(t *testing.T) {
	run(t, []tcase{
		{
			name:     "limits-only pod needs a type that holds its limits",
			simulate: true,
			upstream: "scheduling/suite_test.go: should schedule pods based on their effective requests (limits stand in for missing requests, as the API server defaults them)",
			yaml: `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {limits: {cpu: "3"}}}]
`,
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatal("pod p not placed on a new NodeClaim")
				}
				if slices.Contains(nc.InstanceTypeOptions, "small-instance-type") {
					t.Errorf("options %v include small-instance-type (1.9 CPU allocatable) for a pod limited to 3 CPU", nc.InstanceTypeOptions)
				}
				if nc.InstanceType != "default-instance-type" {
					t.Errorf("launches %s, want the cheapest type holding 3 CPU, default-instance-type", nc.InstanceType)
				}
			},
		},
		{
			name:     "limits beyond every type leave the pod pending",
			upstream: "scheduling/suite_test.go: should not schedule pods that exceed every instance type's resources",
			yaml: `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {limits: {cpu: "100"}}}]
`,
			check: func(t *testing.T, d decision) { expectNotPlaced(t, d, "p") },
		},
		{
			name:     "limits-only replicas do not share a node they would overflow",
			simulate: true,
			upstream: "scheduling/suite_test.go: should schedule pods based on their effective requests (limits stand in for missing requests)",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {limits: {memory: 3Gi}}}]
`,
			check: func(t *testing.T, d decision) {
				expectPlaced(t, d, "web-0", "web-1")
				if a, b := d.claimOf("web-0"), d.claimOf("web-1"); a == b && a != nil && a.InstanceType != "arm-instance-type" {
					t.Errorf("two 3 Gi pods share one %s", a.InstanceType)
				}
			},
		},
		{
			name:     "an init container's limits count",
			upstream: "scheduling/suite_test.go: should schedule based on the max resource requests of containers and initContainers",
			yaml: `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers: [{name: i, image: x, resources: {limits: {cpu: "3"}}}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`,
			check: func(t *testing.T, d decision) {
				if nc := d.claimOf("p"); nc == nil || nc.InstanceType != "default-instance-type" {
					t.Errorf("want default-instance-type for the init container's 3 CPU, got %+v", nc)
				}
			},
		},
		{
			name:     "a daemonset's limits count as overhead",
			simulate: true,
			upstream: "scheduling/suite_test.go: Daemonsets: should account for daemonset resource requests when determining instance type",
			yaml: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: x, resources: {limits: {cpu: "1500m"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`,
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("p")
				if nc == nil {
					t.Fatal("pod p not placed")
				}
				if slices.Contains(nc.InstanceTypeOptions, "small-instance-type") {
					t.Errorf("options %v include small-instance-type: 1 CPU + the daemon's 1.5 CPU do not fit its 1.9", nc.InstanceTypeOptions)
				}
			},
		},
	})
}
