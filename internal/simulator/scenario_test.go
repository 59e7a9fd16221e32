package simulator

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nodewright/nodewright/pkg/catalog"
)

const poolYAML = `
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
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge, m5.2xlarge]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: "1"}}}]
`

func scenarioFS(scenario string) fstest.MapFS {
	return fstest.MapFS{
		"s/scenario.yaml": {Data: []byte(scenario)},
		"s/pool.yaml":     {Data: []byte(poolYAML)},
	}
}

const header = "apiVersion: simulate.nodewright.dev/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec:\n  manifests: [pool.yaml]\n"

// Bad scenarios are refused before anything runs, naming the file and step.
func TestBadScenariosNameFileAndStep(t *testing.T) {
	cases := []struct{ name, steps, want string }{
		{"unknown field", "  steps:\n    - at: 1m\n      scael: {kind: Deployment, name: web, replicas: 2}\n", `unknown field "spec.steps[0].scael"`},
		{"time that does not parse", "  steps:\n    - at: soon\n      scale: {kind: Deployment, name: web, replicas: 2}\n", `spec.steps[0]: "soon" is not a duration`},
		{"no action", "  steps:\n    - at: 1m\n", "spec.steps[0] (at 1m0s): no action"},
		{"two actions", "  steps:\n    - at: 1m\n      scale: {kind: Deployment, name: web, replicas: 2}\n      cordon: {count: 1}\n", "2 actions (scale, cordon)"},
		{"unknown kind", "  steps:\n    - at: 1m\n      delete: {kind: Gadget, name: x}\n", `delete.kind: unknown kind "Gadget"`},
		{"not scalable", "  steps:\n    - at: 1m\n      scale: {kind: Job, name: x, replicas: 1}\n", `scale.kind: "Job" cannot be scaled`},
		{"job without duration", "  steps:\n    - at: 1m\n      jobs: {name: b, cpu: 1}\n", "jobs.duration: required"},
		{"bad quantity", "  steps:\n    - at: 1m\n      jobs: {name: b, duration: 1m, cpu: lots}\n", `spec.steps[0]: quantities must match`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFS(scenarioFS(header+tc.steps), "s/scenario.yaml")
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), "s/scenario.yaml") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the file and %q", err, tc.want)
			}
		})
	}
	t.Run("bad manifest", func(t *testing.T) {
		fsys := scenarioFS(header)
		fsys["s/pool.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n")}
		if _, err := LoadFS(fsys, "s/scenario.yaml"); err == nil || !strings.Contains(err.Error(), "s/pool.yaml") {
			t.Errorf("error %v: want the manifest file named", err)
		}
	})
}

func runScenario(t *testing.T, steps string, duration time.Duration) *Report {
	t.Helper()
	in, err := LoadFS(scenarioFS(header+steps), "s/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep := mustSimulate(t, in, Options{Duration: duration, Seed: 3, BootDelay: 20 * time.Second})
	for _, msg := range rep.Errors {
		t.Logf("controller error: %s", msg)
	}
	return rep
}

func entries(rep *Report, kind string) []Entry {
	var out []Entry
	for _, e := range rep.Timeline {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestSteps(t *testing.T) {
	t.Run("out of capacity: the next offering is used", func(t *testing.T) {
		rep := runScenario(t, "  steps:\n    - at: 0s\n      insufficientCapacity: {instanceType: m5.xlarge}\n    - at: 0s\n      insufficientCapacity: {instanceType: m5.large}\n", 10*time.Minute)
		for _, l := range entries(rep, EntryLaunched) {
			if l.InstanceType != "m5.2xlarge" {
				t.Errorf("launched %s: want only m5.2xlarge, the others are out of capacity", l.InstanceType)
			}
		}
		if rep.Summary.PodsPendingAtEnd != 0 {
			t.Errorf("%d pods pending", rep.Summary.PodsPendingAtEnd)
		}
	})
	t.Run("interrupted spot nodes are replaced", func(t *testing.T) {
		rep := runScenario(t, "  steps:\n    - at: 5m\n      interrupt: {count: 1}\n", 10*time.Minute)
		terminated := entries(rep, EntryTerminated)
		if len(terminated) != 1 || terminated[0].Reason != ReasonInterrupted {
			t.Fatalf("terminated %+v: want one NodeClaim, interrupted", terminated)
		}
		if rep.Summary.Disruptions[ReasonInterrupted] != 1 || rep.Summary.PodsPendingAtEnd != 0 {
			t.Errorf("summary %+v: want 1 interruption and every pod bound again", rep.Summary)
		}
		if launched := entries(rep, EntryLaunched); len(launched) < 2 || launched[len(launched)-1].At < Duration(5*time.Minute) {
			t.Errorf("launches %+v: want a replacement after the interruption", launched)
		}
	})
	t.Run("a NodePool limit patched to zero stops provisioning", func(t *testing.T) {
		rep := runScenario(t, "  steps:\n    - at: 5m\n      patchNodePool: {name: default, patch: {spec: {limits: {cpu: \"0\"}}}}\n"+
			"    - at: 6m\n      scale: {kind: Deployment, name: web, replicas: 40}\n", 10*time.Minute)
		for _, l := range entries(rep, EntryLaunched) {
			if l.At > Duration(5*time.Minute) {
				t.Errorf("launched %s at %s, after the limit", l.NodeClaim, time.Duration(l.At))
			}
		}
		if rep.Summary.PodsPendingAtEnd == 0 {
			t.Error("no pod pending: the limit should leave the new replicas without nodes")
		}
		if len(entries(rep, EntryUnschedulable)) == 0 {
			t.Error("no unschedulable entry explains the pending pods")
		}
	})
	t.Run("jobs run their duration and free their nodes' room", func(t *testing.T) {
		rep := runScenario(t, "  steps:\n    - at: 1m\n      jobs: {name: batch, count: 2, parallelism: 3, duration: 5m, cpu: \"1\"}\n", 20*time.Minute)
		if rep.Summary.PodsCreated != 4+6 || rep.Summary.PodsPendingAtEnd != 0 {
			t.Errorf("summary %+v: want 4 web and 6 job pods, none pending", rep.Summary)
		}
		// While the jobs run the nodes are busier than once they are done.
		peak := 0.0
		for _, s := range rep.Samples {
			peak = max(peak, s.CPU)
		}
		if last := rep.Samples[len(rep.Samples)-1]; last.CPU >= peak || last.CPU <= 0 {
			t.Errorf("CPU utilisation at the end %.1f%%, peak %.1f%%: want the finished jobs' room freed", last.CPU, peak)
		}
	})
	t.Run("deleted nodes are drained and their pods move", func(t *testing.T) {
		rep := runScenario(t, "  steps:\n    - at: 5m\n      deleteNodes: {count: 1}\n", 10*time.Minute)
		if n := len(entries(rep, EntryTerminated)); n != 1 {
			t.Errorf("%d NodeClaims terminated, want the deleted node's", n)
		}
		if rep.Summary.PodsPendingAtEnd != 0 {
			t.Errorf("%d pods pending at the end", rep.Summary.PodsPendingAtEnd)
		}
	})
	t.Run("a missing workload stops the run with the step named", func(t *testing.T) {
		in, err := LoadFS(scenarioFS(header+"  steps:\n    - at: 1m\n      scale: {kind: Deployment, name: nope, replicas: 2}\n"), "s/scenario.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := simulate(t, in, Options{Duration: 5 * time.Minute}); err == nil || !strings.Contains(err.Error(), "spec.steps[0] (at 1m0s)") {
			t.Errorf("error %v: want the step named", err)
		}
	})
}

// A node deleted under a PodDisruptionBudget drains one pod at a time: each
// eviction waits for the previous pod's replacement to run on a new node.
func TestDrainHonoursPodDisruptionBudgets(t *testing.T) {
	fsys := scenarioFS(header + "  steps:\n    - at: 5m\n      deleteNodes: {count: 1}\n")
	fsys["s/pdb.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: web}}\n")}
	fsys["s/scenario.yaml"].Data = []byte(strings.Replace(string(fsys["s/scenario.yaml"].Data), "manifests: [pool.yaml]", "manifests: [pool.yaml, pdb.yaml]", 1))
	run := func(fsys fstest.MapFS) *Report {
		in, err := LoadFS(fsys, "s/scenario.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return mustSimulate(t, in, Options{Duration: 15 * time.Minute, Seed: 3, BootDelay: 20 * time.Second})
	}
	rep := run(fsys)
	terminated := entries(rep, EntryTerminated)
	if len(terminated) != 1 {
		t.Fatalf("terminated %+v, want the deleted node's NodeClaim", terminated)
	}
	bound := 0
	for _, e := range entries(rep, EntryBound) {
		if e.At > Duration(5*time.Minute) {
			bound += e.Pods
		}
	}
	// Without the budget the node empties at once; with it, every evicted
	// pod but the last waits for a replacement to boot.
	if took := time.Duration(terminated[0].At) - 5*time.Minute; took < 20*time.Second {
		t.Errorf("the node drained in %s: the budget should make evictions wait for replacements", took)
	}
	if rep.Summary.PodsPendingAtEnd != 0 || bound == 0 {
		t.Errorf("summary %+v, %d pods re-bound: want every evicted pod running again", rep.Summary, bound)
	}
	noBudget := scenarioFS(header + "  steps:\n    - at: 5m\n      deleteNodes: {count: 1}\n")
	if took := time.Duration(entries(run(noBudget), EntryTerminated)[0].At) - 5*time.Minute; took >= 20*time.Second {
		t.Errorf("without a budget the drain took %s; the test does not show the budget's effect", took)
	}
}

// After a peak, emptied nodes go once consolidateAfter has passed: the
// cluster costs less at the end than at the peak, and the report counts
// the disruptions as empty.
func TestScaleDownAfterAPeakSavesMoney(t *testing.T) {
	rep := runScenario(t, "  steps:\n    - at: 5m\n      scale: {kind: Deployment, name: web, replicas: 40}\n"+
		"    - at: 20m\n      scale: {kind: Deployment, name: web, replicas: 0}\n", time.Hour)
	peak := 0.0
	for _, s := range rep.Samples {
		total := 0.0
		for _, v := range s.CostPerHour {
			total += v
		}
		peak = max(peak, total)
	}
	if rep.Summary.CostPerHourFinal != 0 || peak == 0 {
		t.Errorf("$%.4f/h at the end after a $%.4f/h peak: want every emptied node gone", rep.Summary.CostPerHourFinal, peak)
	}
	if n := rep.Summary.Disruptions["empty"]; n == 0 || n != rep.Summary.NodeClaimsLaunched {
		t.Errorf("disruptions %v after %d launches: want every node removed as empty", rep.Summary.Disruptions, rep.Summary.NodeClaimsLaunched)
	}
	for _, e := range entries(rep, EntryTerminated) {
		if e.At < Duration(20*time.Minute) {
			t.Errorf("%s terminated at %s, before it was empty", e.NodeClaim, time.Duration(e.At))
		}
	}
}

// An on-demand node left underused is replaced by a cheaper one: the
// replacement launches and turns Ready before the old node is drained.
func TestUnderusedOnDemandNodeIsReplacedByACheaperOne(t *testing.T) {
	fsys := scenarioFS(header + "  steps:\n    - at: 5m\n      scale: {kind: Deployment, name: web, replicas: 2}\n")
	fsys["s/pool.yaml"].Data = []byte(strings.Replace(poolYAML, "values: [spot]", "values: [on-demand]", 1))
	fsys["s/pool.yaml"].Data = []byte(strings.Replace(string(fsys["s/pool.yaml"].Data), "replicas: 4", "replicas: 14", 1))
	in, err := LoadFS(fsys, "s/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep := mustSimulate(t, in, Options{Duration: 20 * time.Minute, Seed: 3, BootDelay: 20 * time.Second})
	launched, terminated := entries(rep, EntryLaunched), entries(rep, EntryTerminated)
	if len(launched) < 2 || len(terminated) == 0 {
		t.Fatalf("launched %d, terminated %d: want a replacement launched and the old node gone", len(launched), len(terminated))
	}
	first, replacement := launched[0], launched[len(launched)-1]
	if replacement.Price >= first.Price*0.9 || replacement.InstanceType == first.InstanceType {
		t.Errorf("replacement %s at $%.4f/h for %s at $%.4f/h: want another, at least 10%% cheaper type", replacement.InstanceType, replacement.Price, first.InstanceType, first.Price)
	}
	var ready, gone Duration
	for _, e := range rep.Timeline {
		if e.Kind == EntryReady && e.Node == replacement.NodeClaim {
			ready = e.At
		}
		if e.Kind == EntryTerminated && e.NodeClaim == first.NodeClaim {
			gone = e.At
		}
	}
	if ready == 0 || gone < ready {
		t.Errorf("replacement ready at %s, old node gone at %s: want create before delete", time.Duration(ready), time.Duration(gone))
	}
	if rep.Summary.PodsPendingAtEnd != 0 || rep.Summary.Disruptions["underutilized"] != 1 {
		t.Errorf("summary %+v", rep.Summary)
	}
}

// mergeCluster: two Deployments arriving two minutes apart, each on a small
// node of its own ($0.10/h), where one large node ($0.15/h) holds both.
const mergeCluster = `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: merge}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "100%"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: 1200m}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: b, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: b}}
  template:
    metadata: {labels: {app: b}}
    spec:
      containers: [{name: app, image: nginx, resources: {requests: {cpu: 1200m}}}]
`

// Two underused nodes are merged onto one cheaper node: validated, the
// replacement Ready before both go, every pod bound on it. A pending pod
// that no NodePool can take does not hold consolidation back.
func TestUnderusedNodesAreMergedOntoOneCheaperNode(t *testing.T) {
	huge := "---\napiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: default}\nspec:\n  containers: [{name: app, image: nginx, resources: {requests: {cpu: \"1000\"}}}]\n"
	for _, tc := range []struct{ name, extra string }{{"alone", ""}, {"with a pod no NodePool can take pending", huge}} {
		t.Run(tc.name, func(t *testing.T) { mergeOntoCheaperNode(t, mergeCluster+tc.extra, tc.extra != "") })
	}
}

func mergeOntoCheaperNode(t *testing.T, cluster string, hugePending bool) {
	types, err := catalog.Parse("test", []byte(`[
	  {"name": "small", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.10}]},
	  {"name": "large", "architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "4", "memory": "16Gi", "pods": "110"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.15}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"s/cluster.yaml":  {Data: []byte(cluster)},
		"s/scenario.yaml": {Data: []byte("apiVersion: simulate.nodewright.dev/v1alpha1\nkind: Scenario\nmetadata: {name: merge}\nspec:\n  manifests: [cluster.yaml]\n  steps:\n    - at: 2m\n      scale: {kind: Deployment, name: b, replicas: 1}\n")},
	}
	in, err := LoadFS(fsys, "s/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep := mustSimulate(t, in, Options{Duration: 10 * time.Minute, Seed: 1, InstanceTypes: types})
	launched, terminated := entries(rep, EntryLaunched), entries(rep, EntryTerminated)
	if len(launched) != 3 || launched[0].InstanceType != "small" || launched[1].InstanceType != "small" || launched[2].InstanceType != "large" {
		t.Fatalf("launched %+v: want two small nodes, then one large", launched)
	}
	if len(terminated) != 2 || rep.Summary.Disruptions["underutilized"] != 2 {
		t.Fatalf("terminated %+v, disruptions %v: want both small nodes consolidated", terminated, rep.Summary.Disruptions)
	}
	var ready Duration
	for _, e := range rep.Timeline {
		if e.Kind == EntryReady && e.Node == launched[2].NodeClaim {
			ready = e.At
		}
	}
	for _, e := range terminated {
		if e.At < ready {
			t.Errorf("%s terminated at %s, before the large node was Ready (%s)", e.NodeClaim, time.Duration(e.At), time.Duration(ready))
		}
	}
	pending := 0
	if hugePending {
		pending = 1
	}
	if rep.Summary.CostPerHourFinal != 0.15 || rep.Summary.PodsPendingAtEnd != pending {
		t.Errorf("summary %+v: want $0.15/h at the end, %d pod pending", rep.Summary, pending)
	}
}

// Changing a NodePool's template drifts its nodes: each is replaced (the
// replacement Ready first), the budget of 10 % letting one go at a time,
// and the report counts the disruptions as drifted.
func TestTemplateChangeDriftsNodes(t *testing.T) {
	rep := runScenario(t, "  steps:\n    - at: 10m\n      patchNodePool: {name: default, patch: {spec: {template: {metadata: {labels: {team: web}}}}}}\n", time.Hour)
	drifted := rep.Summary.Disruptions["drifted"]
	if drifted == 0 {
		t.Fatalf("disruptions %v: want the nodes launched before the change drifted and replaced", rep.Summary.Disruptions)
	}
	before := 0
	for _, e := range entries(rep, EntryLaunched) {
		if e.At < Duration(10*time.Minute) {
			before++
		}
	}
	if drifted != before {
		t.Errorf("%d drifted disruptions for %d nodes launched before the change", drifted, before)
	}
	if rep.Summary.PodsPendingAtEnd != 0 {
		t.Errorf("%d pods pending at the end", rep.Summary.PodsPendingAtEnd)
	}
}
