package conformance

import (
	"strings"
	"testing"
)

// spreadPods renders n pods labelled app=spread with one zone spread
// constraint (fragment: extra constraint fields) and an optional pod-spec
// fragment.
func spreadPods(n int, constraint, spec string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(`
---
apiVersion: v1
kind: Pod
metadata: {name: s` + string(rune('a'+i)) + `, labels: {app: spread}}
spec:
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: spread}}` + constraint + `}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "100m"}}}]
` + spec)
	}
	return b.String()
}

// zonesOf returns the zone of each pod's new NodeClaim (or existing node
// via existingZone).
func zonesOf(d decision, pods int) map[string]int {
	out := map[string]int{}
	for i := range pods {
		if nc := d.claimOf("s" + string(rune('a'+i))); nc != nil {
			out[nc.Zone]++
		}
	}
	return out
}

// Theme 4: topology spread.
func TestTopologySpread(t *testing.T) {
	run(t, []tcase{
		{
			name:     "zone spread across the three zones",
			simulate: true,
			upstream: "scheduling/topology_test.go: Zonal: should balance pods across zones (match labels)",
			yaml:     spreadPods(6, "", ""),
			check: func(t *testing.T, d decision) {
				got := zonesOf(d, 6)
				if len(got) != 3 || got["test-zone-1"] != 2 || got["test-zone-2"] != 2 || got["test-zone-3"] != 2 {
					t.Errorf("zones %v, want 2 in each of test-zone-1..3", got)
				}
			},
		},
		{
			name:          "nodeTaintsPolicy Honor: a pool whose taint the pods do not tolerate is not a domain",
			simulate:      true,
			upstream:      "scheduling/topology_test.go: NodeTaintsPolicy: should balance pods across zones, ignoring tainted NodePools (nodeTaintsPolicy: Honor)",
			noDefaultPool: true,
			yaml:          twoZonePools + spreadPods(4, ", nodeTaintsPolicy: Honor", ""),
			check: func(t *testing.T, d decision) {
				expectPlaced(t, d, "sa", "sb", "sc", "sd")
				if got := zonesOf(d, 4); got["test-zone-1"] != 2 || got["test-zone-2"] != 2 {
					t.Errorf("zones %v, want 2 in test-zone-1 and 2 in test-zone-2", got)
				}
			},
		},
		{
			name:          "nodeTaintsPolicy Ignore (the default): the tainted pool's zone counts, with no pod",
			upstream:      "scheduling/topology_test.go: NodeTaintsPolicy: should not balance pods across zones ignoring tainted NodePools when nodeTaintsPolicy is Ignore",
			noDefaultPool: true,
			yaml:          twoZonePools + spreadPods(4, "", ""),
			check: func(t *testing.T, d decision) {
				placed := 0
				for _, p := range []string{"sa", "sb", "sc", "sd"} {
					if d.placed(p) {
						placed++
					}
				}
				if placed != 2 {
					t.Errorf("%d pods placed, want 2 (one per untainted zone; test-zone-3 stays at 0)", placed)
				}
			},
		},
		{
			name:     "nodeAffinityPolicy Honor: zones the pod's node affinity excludes are not domains",
			upstream: "scheduling/topology_test.go: NodeAffinityPolicy: should balance pods across zones that match the pod's node affinity (nodeAffinityPolicy: Honor)",
			yaml: spreadPods(4, "", `  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]}]}}}
`),
			check: func(t *testing.T, d decision) {
				expectPlaced(t, d, "sa", "sb", "sc", "sd")
			},
		},
		{
			name:          "spread on a label each pool stamps, across pools",
			simulate:      true,
			upstream:      "scheduling/topology_test.go: Combined Hostname and Zonal / custom topology keys: should balance pods across NodePools on a custom label their templates define",
			noDefaultPool: true,
			yaml:          rackPools + strings.ReplaceAll(spreadPods(4, "", ""), "topologyKey: topology.kubernetes.io/zone", "topologyKey: rack"),
			check: func(t *testing.T, d decision) {
				expectPlaced(t, d, "sa", "sb", "sc", "sd")
				pools := map[string]int{}
				for _, p := range []string{"sa", "sb", "sc", "sd"} {
					if nc := d.claimOf(p); nc != nil {
						pools[nc.NodePool]++
					}
				}
				if pools["rack-a"] != 2 || pools["rack-b"] != 2 {
					t.Errorf("pods per pool %v, want 2 on rack-a and 2 on rack-b", pools)
				}
			},
		},
		{
			name:     "a bound volume's zone with minDomains",
			simulate: true,
			upstream: "scheduling/topology_test.go: MinDomains: should respect a PVC's zone together with minDomains",
			yaml: `
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}, volumeName: pv-1, storageClassName: ""}
status: {phase: Bound}
` + spreadPods(1, ", minDomains: 3", `  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`),
			check: func(t *testing.T, d decision) {
				nc := d.claimOf("sa")
				if nc == nil {
					t.Fatalf("pod sa not placed: %s", d.unschedulable("sa"))
				}
				if nc.Zone != "test-zone-2" {
					t.Errorf("zone %s, want the volume's test-zone-2", nc.Zone)
				}
			},
		},
	})
}

// twoZonePools: the default pool in test-zone-1 and -2, and a pool tainted
// dedicated:NoSchedule in test-zone-3.
const twoZonePools = `
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: tainted}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-3]}]
      taints: [{key: dedicated, effect: NoSchedule}]
`

// rackPools: two pools stamping rack=a and rack=b on their nodes.
const rackPools = `
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: rack-a}
spec:
  template:
    metadata: {labels: {rack: a}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: rack-b}
spec:
  template:
    metadata: {labels: {rack: b}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`
