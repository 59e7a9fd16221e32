package conformance

import (
	"strings"
	"testing"
)

// claimPod is a pod mounting claim "data".
const claimPod = `
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`

func storageClass(binding string) string {
	return `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal}
provisioner: ebs.csi.aws.com
` + binding + `
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-2]}]
---
`
}

// zonalPV is a volume in test-zone-3, bound (or not) to claim data.
func zonalPV(extraMeta string) string {
	return `
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1` + extraMeta + `}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-3]}]}]}}
`
}

func claim(spec, meta, status string) string {
	return `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data` + meta + `}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}` + spec + `}
` + status
}

const bound = `, annotations: {pv.kubernetes.io/bind-completed: "yes"}`

// Theme 7: a pod waits while its claims cannot bind on its node.
func TestVolumes(t *testing.T) {
	expectZone := func(zone string) func(*testing.T, decision) {
		return func(t *testing.T, d decision) {
			if nc := d.claimOf("p"); nc == nil || nc.Zone != zone {
				t.Errorf("want a node in %s, got %+v (%s)", zone, nc, d.unschedulable("p"))
			}
		}
	}
	heldBack := func(why string) func(*testing.T, decision) {
		return func(t *testing.T, d decision) {
			expectNotPlaced(t, d, "p")
			if r := d.unschedulable("p"); !strings.Contains(r, why) {
				t.Errorf("reason %q does not say %q", r, why)
			}
		}
	}
	run(t, []tcase{
		{
			name:     "a bound claim pins the node to its volume's zone",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should launch nodes for pods with a bound PVC in the PV's zone",
			yaml:     claim(", volumeName: pv-1, storageClassName: zonal", bound, "status: {phase: Bound}") + zonalPV("") + claimPod,
			check:    expectZone("test-zone-3"),
		},
		{
			name:     "an unbound WaitForFirstConsumer claim follows its class's allowed topologies",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should launch nodes in the storage class's allowed topologies for an unbound PVC",
			yaml:     storageClass("volumeBindingMode: WaitForFirstConsumer") + claim(", storageClassName: zonal", "", "") + claimPod,
			check:    expectZone("test-zone-2"),
		},
		{
			name:     "an unbound claim with an empty storage class waits",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods with an unbound PVC with an empty storage class",
			yaml:     claim(`, storageClassName: ""`, "", "") + claimPod,
			check:    heldBack("no StorageClass"),
		},
		{
			name:     "an unbound claim of an Immediate class waits for the PV controller",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods whose Immediate PVC is not bound yet",
			yaml:     storageClass("volumeBindingMode: Immediate") + claim(", storageClassName: zonal", "", "") + claimPod,
			check:    heldBack("binds Immediately"),
		},
		{
			name:     "a class without a binding mode binds Immediately",
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods whose Immediate PVC is not bound yet (volumeBindingMode defaults to Immediate)",
			yaml:     storageClass("") + claim(", storageClassName: zonal", "", "") + claimPod,
			check:    heldBack("binds Immediately"),
		},
		{
			name:     "a claim whose volume is being deleted waits",
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods whose PV is being deleted",
			yaml: claim(", volumeName: pv-1, storageClassName: zonal", bound, "status: {phase: Bound}") +
				zonalPV(`, deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [kubernetes.io/pv-protection]`) + claimPod,
			check: heldBack("being deleted"),
		},
		{
			name:     "a Lost claim waits",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods with a Lost PVC",
			yaml:     claim(", volumeName: pv-1, storageClassName: zonal", bound, "status: {phase: Lost}") + zonalPV("") + claimPod,
			check:    heldBack("Lost"),
		},
		{
			name:     "a claim naming a volume before its binding completes waits",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods whose PVC names a volume without the bind-completed annotation",
			yaml:     claim(", volumeName: pv-1, storageClassName: zonal", "", "") + zonalPV("") + claimPod,
			check:    heldBack("binding is not complete"),
		},
		{
			name:     "a missing claim waits",
			simulate: true,
			upstream: "scheduling/suite_test.go: Volume Topology: should not launch nodes for pods whose PVC does not exist",
			yaml:     strings.TrimPrefix(claimPod, "\n---\n"),
			check:    heldBack("not found"),
		},
	})
}
