package conformance

import (
	"slices"
	"testing"
)

// daemonSet renders a DaemonSet of one container requesting cpu, with an
// optional pod-spec fragment (indented for the template's spec).
func daemonSet(cpu, spec string) string {
	return `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: x, resources: {requests: {cpu: "` + cpu + `"}}}]
` + spec
}

const oneCPUPod = `
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`

// expectNoSmall fails unless p is placed on a claim whose options leave out
// small-instance-type (1.9 CPU allocatable): the daemon's overhead counted.
func expectNoSmall(t *testing.T, d decision) {
	t.Helper()
	nc := d.claimOf("p")
	if nc == nil {
		t.Fatalf("pod p not placed: %s", d.unschedulable("p"))
	}
	if slices.Contains(nc.InstanceTypeOptions, "small-instance-type") {
		t.Errorf("options %v include small-instance-type: the daemon's 1.5 CPU was not counted", nc.InstanceTypeOptions)
	}
}

// Theme 5: DaemonSets.
func TestDaemonSets(t *testing.T) {
	run(t, []tcase{
		{
			name:     "the template's requests are overhead on every new node",
			simulate: true,
			upstream: "scheduling/suite_test.go: Daemonsets: should account for daemonset resource requests when determining instance type",
			yaml:     daemonSet("1500m", "") + oneCPUPod,
			check:    expectNoSmall,
		},
		{
			name:     "an existing pod of the DaemonSet sizes its overhead over the template",
			simulate: true,
			upstream: "scheduling/suite_test.go: Daemonsets: should use the daemonset pod's resources (not the template's) when a pod of the daemonset exists",
			yaml: daemonSet("100m", "") + `
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x1
  namespace: kube-system
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: ds-uid, controller: true}]
spec:
  nodeName: somewhere
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [somewhere]}]}]}}}
  containers: [{name: a, image: x, resources: {requests: {cpu: "1500m"}}}]
status: {phase: Running}
` + oneCPUPod,
			check: expectNoSmall,
		},
		{
			name:     "a DaemonSet selecting karpenter.sh/initialized nodes counts",
			simulate: true,
			upstream: "scheduling/suite_test.go: Daemonsets: should count daemonsets with node affinity to karpenter.sh/initialized and karpenter.sh/registered",
			yaml: daemonSet("1500m", `      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: karpenter.sh/initialized, operator: In, values: ["true"]}, {key: karpenter.sh/registered, operator: Exists}]}]}}}
`) + oneCPUPod,
			check: expectNoSmall,
		},
		{
			name:     "a DaemonSet selecting another architecture does not count",
			simulate: true,
			upstream: "scheduling/suite_test.go: Daemonsets: should not account for daemonset requests when the daemonset's node affinity does not match the instance type",
			yaml: daemonSet("1500m", `      nodeSelector: {kubernetes.io/arch: arm64}
`) + oneCPUPod,
			check: func(t *testing.T, d decision) {
				if nc := d.claimOf("p"); nc == nil || nc.InstanceType != "small-instance-type" {
					t.Errorf("want small-instance-type (amd64 runs no agent), got %+v", nc)
				}
			},
		},
		{
			name:     "a pending DaemonSet pod is not provisioned for",
			simulate: true,
			upstream: "provisioning/suite_test.go: should not provision for pods owned by a DaemonSet",
			yaml: `
apiVersion: v1
kind: Pod
metadata:
  name: agent-pending
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: ds-uid, controller: true}]
spec:
  containers: [{name: a, image: x, resources: {requests: {cpu: "1"}}}]
`,
			check: func(t *testing.T, d decision) {
				if len(d.NodeClaims) != 0 || d.placed("agent-pending") {
					t.Errorf("a DaemonSet's pending pod got a node: %d NodeClaims", len(d.NodeClaims))
				}
			},
		},
	})
}
