package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// explainCluster: one pool consolidating at once, a pinned pod
// (do-not-disrupt) that gets a node of its own, and a second Deployment
// arriving later on a node of its own.
const explainCluster = `apiVersion: karpenter.kwok.sh/v1alpha1
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
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: pinned}}
  template:
    metadata:
      labels: {app: pinned}
      annotations: {karpenter.sh/do-not-disrupt: "true"}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: 500m}}}]
`

func TestExplainNodeInASimulation(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(explainCluster), 0o600); err != nil {
		t.Fatal(err)
	}
	timeline, err := run(t, "simulate", "-q", "-f", dir, "--duration", "5m")
	if err != nil {
		t.Fatal(err)
	}
	launched := regexp.MustCompile(`launched\s+nodeclaim (\S+) `).FindStringSubmatch(timeline)
	if launched == nil {
		t.Fatalf("no NodeClaim launched:\n%s", timeline)
	}
	out, err := run(t, "explain", "node", launched[1], "-f", dir, "--at", "5m")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Node " + launched[1], "m5.large on-demand", "consolidationPolicy WhenEmptyOrUnderutilized",
		"Verdict: it stays: pod default/pinned-", "has karpenter.sh/do-not-disrupt"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "explain", "node", "no-such-node", "-f", dir, "--at", "1m"); err == nil || !strings.Contains(err.Error(), "no-such-node") {
		t.Errorf("explaining an unknown node: %v, want an error naming it", err)
	}
}
