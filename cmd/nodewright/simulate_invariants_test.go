package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/simulator"
)

// stuckPool: a NodePool whose startup taint nothing removes, so the nodes
// bought for the Deployment's pods never take them.
const stuckPool = `
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
      startupTaints: [{key: example.com/agent-not-ready, effect: NoSchedule}]
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`

// A run that breaks an invariant prints the violation with its time line
// and the command that replays it, lists it in -o json, and fails; a run
// that keeps them all says so and succeeds.
func TestSimulateFailsOnInvariantViolations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stuck.yaml")
	if err := os.WriteFile(path, []byte(stuckPool), 0o600); err != nil {
		t.Fatal(err)
	}
	replay := "nodewright simulate --duration 20m0s --filename " + path + " --seed 3"

	out, err := run(t, "simulate", "-q", "-f", path, "--duration", "20m", "--seed", "3")
	if err == nil || !strings.Contains(err.Error(), "1 invariant violation(s); the first, schedulable-pods-bound at 16m0s") || !strings.Contains(err.Error(), replay) {
		t.Errorf("error %v: want the violation named, with its replay command %q", err, replay)
	}
	for _, want := range []string{"invariants   1 violation(s)", "VIOLATION schedulable-pods-bound at 16m0s", "pod/default/web-", "replay: " + replay} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = run(t, "simulate", "-q", "-f", path, "--duration", "20m", "--seed", "3", "-o", "json")
	if err == nil {
		t.Error("-o json: no error, want the violation to fail the command")
	}
	var rep simulator.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(rep.Violations) != 1 || rep.Violations[0].Invariant != simulator.InvariantPodsBound || rep.Violations[0].Replay != replay {
		t.Errorf("violations %+v: want the pending pods, replayed by %q", rep.Violations, replay)
	}

	out, err = run(t, "simulate", "-q", "--duration", "20m", "-o", "json")
	if err != nil {
		t.Fatalf("the quickstart: %v", err)
	}
	if !strings.Contains(out, `"violations": []`) {
		t.Errorf("the quickstart's report lacks an empty violations list")
	}
}
