package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/plan"
)

func TestPlanJSON(t *testing.T) {
	out, err := run(t, "plan", "-f", "../../testdata/seed", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got plan.Output
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("plan -o json is not the documented shape: %v\n%s", err, out)
	}
	if len(got.Unschedulable) != 0 || len(got.NodeClaims) == 0 {
		t.Fatalf("seed plan: %+v", got)
	}
	placed := 0
	total := 0.0
	for _, nc := range got.NodeClaims {
		placed += len(nc.Pods)
		total += nc.Price
		if nc.NodePool != "stable" || nc.CapacityType != "on-demand" || len(nc.InstanceTypeOptions) == 0 || nc.InstanceTypeOptions[0] != nc.InstanceType {
			t.Errorf("web-api claim: %+v", nc)
		}
	}
	if placed != 6 {
		t.Errorf("%d pods placed, want web-api's 6", placed)
	}
	if got.TotalPricePerHour != total || got.SolveSeconds <= 0 {
		t.Errorf("totalPricePerHour %v (sum %v), solveSeconds %v", got.TotalPricePerHour, total, got.SolveSeconds)
	}
	// Every key of the documented shape is present, even when empty.
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"nodeClaims", "existing", "unschedulable", "totalPricePerHour", "solveSeconds"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON has no %q", k)
		}
	}
}

func TestPlanTextExplainsUnschedulablePods(t *testing.T) {
	dir := t.TempDir()
	gpuPod := `apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  containers: [{name: t, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(gpuPod), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "plan", "-f", "../../testdata/seed/nodepool-default.yaml", "-f", "../../testdata/seed/nodepool-gpu.yaml",
		"-f", "../../testdata/seed/ec2nodeclass-default.yaml", "-f", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"unschedulable ml/trainer:",
		"NodePool gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated",
		"NodePool default: no instance type (karpenter.k8s.aws/instance-category In [c m r]",
		"has enough nvidia.com/gpu (requested 1)",
		"total: 0 NodeClaim(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
}

func TestPlanBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, resources: {requests: {cpu: lots}}}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(badPool, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: Inn, values: [amd64]}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	badCatalog := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(badCatalog, []byte(`[{"name": "x"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-f", bad}, "bad.yaml: document 1 (Pod p)"},
		// What kube-apiserver would refuse, in its words.
		{[]string{"plan", "-f", badPool}, `pool.yaml: document 1 (NodePool web): NodePool.karpenter.sh "web" is invalid: [spec.template.spec.requirements[0].operator: Unsupported value: "Inn"`},
		{[]string{"plan", "-f", "../../testdata/seed", "--catalog", badCatalog}, `catalog.json: instance type [0] "x"`},
		{[]string{"plan", "-f", "../../testdata/seed", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"plan"}, "no manifests"},
	}
	for _, c := range cases {
		_, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
}

func TestPlanFollowsVolumeTopology(t *testing.T) {
	dir := t.TempDir()
	const docs = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1b]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: x, resources: {requests: {cpu: "1", memory: 2Gi}}}]}
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pgdata-db-0, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec: {volumeName: pv-0, storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-0}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
`
	if err := os.WriteFile(filepath.Join(dir, "db.yaml"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "plan", "-f", "../../testdata/seed/nodepool-default.yaml", "-f", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got plan.Output
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	zones := map[string]string{}
	for _, nc := range got.NodeClaims {
		for _, p := range nc.Pods {
			zones[p] = nc.Zone
		}
	}
	if zones["default/db-0"] != "us-east-1a" || zones["default/db-1"] != "us-east-1b" {
		t.Errorf("db-0 in %q (its volume is in us-east-1a), db-1 in %q (its class provisions in us-east-1b); unschedulable: %+v",
			zones["default/db-0"], zones["default/db-1"], got.Unschedulable)
	}
}
