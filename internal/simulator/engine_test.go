package simulator

import (
	"context"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/pkg/catalog"
)

const basicManifests = `
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
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: nginx
          resources: {requests: {cpu: "1", memory: 1Gi}}
`

func defaultCatalog(t testing.TB) []catalog.InstanceType {
	t.Helper()
	types, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func TestDeploymentGetsNodesAndEveryPodBinds(t *testing.T) {
	set := &manifest.Set{}
	if err := set.Add("basic.yaml", []byte(basicManifests)); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{InstanceTypes: defaultCatalog(t), Duration: 10 * time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Apply(ctx, set); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range rep.Timeline {
		t.Logf("%+v", entry)
	}
	t.Logf("summary %+v errors %v", rep.Summary, rep.Errors)
	if rep.Summary.PodsBound != 10 || rep.Summary.PodsPendingAtEnd != 0 {
		t.Errorf("%d pods bound, %d pending: want all 10 bound", rep.Summary.PodsBound, rep.Summary.PodsPendingAtEnd)
	}
}
