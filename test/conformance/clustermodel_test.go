package conformance

import (
	"strings"
	"testing"
)

// A NodeClaim of the default pool launched as default-instance-type in
// test-zone-1, with its node registered under another name (they pair by
// provider ID). initialized and taints vary per case.
func launchedPair(claimStatus, nodeTaints, nodeLabels string) string {
	return `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: default-instance-type, topology.kubernetes.io/zone: test-zone-1, karpenter.sh/capacity-type: on-demand}
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]
status:
  providerID: fake://i-0abc
  nodeName: ip-10-0-0-1
  capacity: {cpu: "4", memory: 4Gi, pods: "5"}
  allocatable: {cpu: 3900m, memory: 4086Mi, pods: "5"}
` + claimStatus + `
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: default-instance-type, topology.kubernetes.io/zone: test-zone-1, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: ip-10-0-0-1` + nodeLabels + `}
spec:
  providerID: fake://i-0abc
` + nodeTaints + `
`
}

const initializedCondition = `  conditions:
  - {type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-01-01T00:00:00Z"}`

const onePod = `
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`

// Theme 2: plan sees the cluster through the controller's model.
func TestClusterModel(t *testing.T) {
	run(t, []tcase{
		{
			name:     "a starting node takes pods despite its not-ready taint, with its NodeClaim's room",
			upstream: "scheduling/suite_test.go: In-Flight Nodes: should not launch a second node if there is an in-flight node (an uninitialized node's not-ready and startup taints are ignored; its NodeClaim's allocatable stands while the node reports none)",
			yaml:     launchedPair("", `  taints: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}]`, "") + onePod,
			check: func(t *testing.T, d decision) {
				if got := d.existingOf("p"); got != "ip-10-0-0-1" {
					t.Errorf("pod p on %q, want the starting node ip-10-0-0-1 (no second node)", got)
				}
				if len(d.NodeClaims) != 0 {
					t.Errorf("%d new NodeClaims, want none", len(d.NodeClaims))
				}
			},
		},
		{
			name:     "an initialized node's taints hold",
			upstream: "scheduling/suite_test.go: In-Flight Nodes: should not assume pod will schedule to a tainted node once it is initialized",
			yaml:     launchedPair(initializedCondition, `  taints: [{key: example.com/dedicated, value: db, effect: NoSchedule}]`, ", karpenter.sh/initialized: \"true\", karpenter.sh/registered: \"true\"") + onePod,
			check: func(t *testing.T, d decision) {
				if d.existingOf("p") != "" || d.claimOf("p") == nil {
					t.Errorf("pod p should get a new node, not the tainted initialized one")
				}
			},
		},
		{
			name:     "the node's initialized label alone marks it initialized",
			upstream: "scheduling/suite_test.go: In-Flight Nodes: should not assume pod will schedule to a tainted node once it is initialized (Karpenter reads karpenter.sh/initialized on the node)",
			yaml:     launchedPair("", `  taints: [{key: node.kubernetes.io/not-ready, effect: NoSchedule}]`, ", karpenter.sh/initialized: \"true\"") + onePod,
			check: func(t *testing.T, d decision) {
				if d.existingOf("p") != "" {
					t.Errorf("pod p placed on an initialized node that is not ready")
				}
			},
		},
		{
			name:     "claims pair with nodes by provider ID: capacity is not counted twice",
			upstream: "provisioning/suite_test.go: should not exceed nodepool limits (a NodeClaim and its Node are one machine)",
			yaml: launchedPair(initializedCondition, "", ", karpenter.sh/initialized: \"true\"") + `
---
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "3500m"}}}]
`,
			check: func(t *testing.T, d decision) {
				// The existing node reports no allocatable of its own here:
				// its claim's 3.9 CPU is its room, once.
				if got := d.existingOf("big"); got != "ip-10-0-0-1" {
					t.Errorf("pod big on %q, want ip-10-0-0-1", got)
				}
			},
		},
		{
			name:          "a NodePool written Ready=False is not launched from",
			upstream:      "provisioning/suite_test.go: should not provision when the nodepool is not ready",
			noDefaultPool: true,
			yaml: defaultPool + `
status:
  conditions:
  - {type: Ready, status: "False", reason: NodeClassNotReady, lastTransitionTime: "2026-01-01T00:00:00Z"}
` + onePod,
			check: func(t *testing.T, d decision) {
				expectNotPlaced(t, d, "p")
				if !strings.Contains(strings.Join(d.warnings, "\n"), "not Ready") {
					t.Errorf("no warning says the pool is not Ready: %v", d.warnings)
				}
			},
		},
		{
			name:          "a NodePool being deleted is not launched from",
			upstream:      "provisioning/suite_test.go: should ignore NodePools that are deleting",
			noDefaultPool: true,
			yaml:          strings.Replace(defaultPool, "metadata: {name: default}\nspec:", "metadata: {name: default, deletionTimestamp: \"2026-01-01T00:00:00Z\", finalizers: [karpenter.sh/termination]}\nspec:", 1) + onePod,
			check:         func(t *testing.T, d decision) { expectNotPlaced(t, d, "p") },
		},
		{
			name:          "a static NodePool is not provisioned for",
			upstream:      "provisioning/suite_test.go: Static NodePools: should not provision nodes for pending pods from a static NodePool",
			noDefaultPool: true,
			yaml:          strings.Replace(defaultPool, "spec:\n  template:", "spec:\n  replicas: 2\n  template:", 1) + onePod,
			check:         func(t *testing.T, d decision) { expectNotPlaced(t, d, "p") },
		},
		{
			name:          "a launched NodeClaim known only by status.capacity counts toward limits",
			upstream:      "provisioning/suite_test.go: should not schedule if limits would be exceeded (in-flight NodeClaims count their capacity)",
			noDefaultPool: true,
			yaml: strings.Replace(defaultPool, "spec:\n  template:", "spec:\n  limits: {cpu: \"6\"}\n  template:", 1) + `
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-inflight
  labels: {karpenter.sh/nodepool: default}
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]
status:
  providerID: fake://i-0inflight
  capacity: {cpu: "4", memory: 4Gi, pods: "5"}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "2500m"}}}]
`,
			check: func(t *testing.T, d decision) {
				// 2.5 CPU needs default-instance-type (4 CPU): with the 4 in
				// flight that passes the pool's limit of 6.
				expectNotPlaced(t, d, "p")
			},
		},
		{
			name:     "pods on a deleting node get new room before they are evicted",
			upstream: "provisioning/suite_test.go: Deleting Nodes: should re-schedule pods from a deleting node when pods are active",
			yaml: strings.Replace(launchedPair(initializedCondition, "", ", karpenter.sh/initialized: \"true\""),
				"  name: ip-10-0-0-1\n", "  name: ip-10-0-0-1\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n  finalizers: [karpenter.sh/termination]\n", 1) + `
---
apiVersion: v1
kind: Pod
metadata: {name: running}
spec:
  nodeName: ip-10-0-0-1
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
status: {phase: Running}
`,
			check: func(t *testing.T, d decision) {
				if d.claimOf("running") == nil {
					t.Errorf("the running pod on the deleting node got no new room")
				}
			},
		},
		{
			name:     "pods on a cordoned node are left where they are",
			upstream: "provisioning/suite_test.go: Deleting Nodes: should not re-schedule pods from a node that is not deleting",
			yaml: launchedPair(initializedCondition, "  unschedulable: true", ", karpenter.sh/initialized: \"true\"") + `
---
apiVersion: v1
kind: Pod
metadata: {name: running}
spec:
  nodeName: ip-10-0-0-1
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
status: {phase: Running}
`,
			check: func(t *testing.T, d decision) {
				if len(d.NodeClaims) != 0 {
					t.Errorf("%d NodeClaims bought for a cordoned node's pods", len(d.NodeClaims))
				}
			},
		},
		{
			name:     "a node reporting only capacity is room",
			upstream: "scheduling/suite_test.go: Existing Nodes: should schedule pods to existing nodes (a node's capacity stands for its allocatable when it reports none)",
			yaml: `
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}}
status: {capacity: {cpu: "4", memory: 4Gi, pods: "10"}}
` + onePod,
			check: func(t *testing.T, d decision) {
				if got := d.existingOf("p"); got != "n1" {
					t.Errorf("pod p on %q, want the existing node n1", got)
				}
			},
		},
		{
			name:     "workloads of different kinds with one name are all planned",
			upstream: "provisioning/suite_test.go: should provision for every pending pod (pod names are unique in a namespace)",
			yaml: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: web-db}}
  template:
    metadata: {labels: {app: web-db}}
    spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
`,
			check: func(t *testing.T, d decision) {
				n := len(d.Unschedulable)
				for _, nc := range d.NodeClaims {
					n += len(nc.Pods)
				}
				for _, e := range d.Existing {
					n += len(e.Pods)
				}
				if n != 4 {
					t.Errorf("%d pods decided, want 4 (2 of the Deployment, 2 of the StatefulSet)", n)
				}
			},
		},
		{
			name:     "a pod that is not pending for Nodewright is said so",
			simulate: true,
			upstream: "provisioning/suite_test.go: should not provision for pods with scheduling gates",
			yaml: `
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/wait}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`,
			check: func(t *testing.T, d decision) {
				expectNotPlaced(t, d, "gated")
				if !strings.Contains(strings.Join(d.warnings, "\n"), "pod default/gated is not provisioned for: it has scheduling gates") {
					t.Errorf("no warning names the gated pod: %v", d.warnings)
				}
			},
		},
	})
}
