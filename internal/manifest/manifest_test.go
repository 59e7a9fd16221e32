package manifest

import (
	"strings"
	"testing"
)

func TestLoadSeedDirectory(t *testing.T) {
	s, err := Load("../../testdata/seed")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NodePools) != 3 || len(s.EC2NodeClasses) != 1 || len(s.Deployments) != 1 {
		t.Fatalf("read %d NodePools, %d EC2NodeClasses, %d Deployments; want 3, 1, 1", len(s.NodePools), len(s.EC2NodeClasses), len(s.Deployments))
	}
	pods := s.PendingPods()
	if len(pods) != 6 {
		t.Fatalf("web-api expanded to %d pods, want its 6 replicas", len(pods))
	}
	p := pods[5]
	if p.Name != "web-api-5" || p.Namespace != "default" || p.Labels["app"] != "web-api" || p.Spec.NodeSelector["node-type"] != "stable" {
		t.Errorf("expanded pod: %s/%s labels %v selector %v", p.Namespace, p.Name, p.Labels, p.Spec.NodeSelector)
	}
	if p.OwnerReferences[0].Kind != "Deployment" || string(p.UID) != "default/web-api-5" {
		t.Errorf("owner %v uid %s", p.OwnerReferences, p.UID)
	}
}

func TestAddWorkloadsAndPods(t *testing.T) {
	const docs = `
apiVersion: v1
kind: Namespace
metadata: {name: batch, labels: {team: data}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
# a comment-only document is skipped
---
apiVersion: batch/v1
kind: Job
metadata: {name: etl, namespace: batch}
spec:
  parallelism: 5
  completions: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: etl, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: bound}
  spec: {nodeName: node-1, containers: [{name: a, image: x}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: pending}
  spec: {containers: [{name: a, image: x}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: x, resources: {requests: {cpu: 100m}}}]}
`
	s := &Set{}
	if err := s.Add("docs.yaml", []byte(docs)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.PendingPods() {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if got := strings.Join(names, " "); got != "default/pending batch/etl-0 batch/etl-1 batch/etl-2" {
		t.Errorf("pending pods %q, want the pending pod and 3 Job pods (completions caps parallelism)", got)
	}
	if bound := s.BoundPods()["node-1"]; len(bound) != 1 || bound[0].Name != "bound" {
		t.Errorf("bound pods: %v", s.BoundPods())
	}
	if len(s.DaemonSets) != 1 || s.DaemonSets[0].Namespace != "kube-system" {
		t.Errorf("daemonsets: %v", s.DaemonSets)
	}
	if len(s.Namespaces) != 1 || s.Namespaces[0].Name != "batch" || s.Namespaces[0].Labels["team"] != "data" {
		t.Errorf("namespaces: %v", s.Namespaces)
	}
	if s.Ignored["ConfigMap"] != 1 {
		t.Errorf("ignored: %v", s.Ignored)
	}
}

func TestBadInputNamesFileAndObject(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"unknown kind", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", `bad.yaml: document 1 (Widget w): unsupported kind Widget`},
		{"invalid quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: a, image: x, resources: {requests: {cpu: lots}}}]}\n", `bad.yaml: document 1 (Pod ns/p): `},
		{"unknown field", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec: {templat: {}}\n", `(NodePool np): json: unknown field "templat"`},
		{"wrong version", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n", `(NodePool old): apiVersion "karpenter.sh/v1beta1": want karpenter.sh/v1`},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "kind: required"},
		{"not YAML", "apiVersion: v1\nkind: Pod\n  bad: [indent\n", "bad.yaml: document 1"},
		{"second document", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", "document 2 (Gadget g)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := (&Set{}).Add("bad.yaml", []byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
	if _, err := Load("does-not-exist.yaml"); err == nil || !strings.Contains(err.Error(), "does-not-exist.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestStatefulSetClaimsAndStorage(t *testing.T) {
	const docs = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1b]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: x}]}
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pgdata-db-0, namespace: data}
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
	s := &Set{}
	if err := s.Add("db.yaml", []byte(docs)); err != nil {
		t.Fatal(err)
	}
	pods := s.PendingPods()
	if len(pods) != 2 || len(pods[1].Spec.Volumes) != 1 || pods[1].Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "pgdata-db-1" {
		t.Fatalf("StatefulSet pods and their claims: %+v", pods)
	}
	claims := map[string]string{}
	for _, c := range s.AllPersistentVolumeClaims() {
		claims[c.Namespace+"/"+c.Name] = c.Spec.VolumeName
	}
	if len(claims) != 2 || claims["data/pgdata-db-0"] != "pv-0" || claims["data/pgdata-db-1"] != "" {
		t.Errorf("claims %v: want the bound one read and the other generated unbound", claims)
	}
	if len(s.StorageClasses) != 1 || len(s.PersistentVolumes) != 1 {
		t.Errorf("storage read: %d classes, %d volumes", len(s.StorageClasses), len(s.PersistentVolumes))
	}
}
