package conformance

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/plan"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/simulator"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// tcase is one pinned behaviour.
type tcase struct {
	name string
	// upstream names the Karpenter test the behaviour comes from: file,
	// then the It(...) description.
	upstream string
	// yaml holds the manifests after the default NodePool and class
	// (defaultPool), unless noDefaultPool.
	yaml          string
	noDefaultPool bool
	catalog       []catalog.InstanceType // nil: FakeCatalog()
	policy        sched.MinValuesPolicy
	check         func(t *testing.T, d decision)
	// simulate also plays the manifests in the simulator (the live
	// controllers on a virtual clock) and requires the same decision: as
	// many NodeClaims launched, the same $/h, the same pods left pending.
	simulate bool
}

// defaultPool is the NodePool Karpenter's suites start from: no
// constraint beyond the class (the CRD requires a requirement: both
// capacity types), no limits.
const defaultPool = `
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
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]
`

// run decides the cases through plan's path.
func run(t *testing.T, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.upstream == "" {
				t.Fatal("case names no upstream behaviour")
			}
			set := &manifest.Set{}
			docs := tc.yaml
			if !tc.noDefaultPool {
				docs = defaultPool + "---\n" + docs
			}
			if err := set.Add(tc.name+".yaml", []byte(docs)); err != nil {
				t.Fatalf("manifests: %v", err)
			}
			types := tc.catalog
			if types == nil {
				types = FakeCatalog()
			}
			in, warnings := plan.Input(set, types)
			in.MinValuesPolicy = tc.policy
			if in.MinValuesPolicy == "" {
				in.MinValuesPolicy = sched.MinValuesStrict
			}
			d := decision{Plan: sched.Solve(in), warnings: warnings}
			tc.check(t, d)
			if tc.simulate {
				agreeWithSimulation(t, set, types, in.MinValuesPolicy, d)
			}
			if t.Failed() {
				t.Logf("upstream: %s\n%s", tc.upstream, d)
			}
		})
	}
}

// decision is a plan with lookups by pod name.
type decision struct {
	sched.Plan
	warnings []string
}

// claimOf returns the new NodeClaim a pod is placed on, or nil.
func (d decision) claimOf(pod string) *sched.NodeClaim {
	for i := range d.NodeClaims {
		for _, p := range d.NodeClaims[i].Pods {
			if p.Name == pod {
				return &d.NodeClaims[i]
			}
		}
	}
	return nil
}

// existingOf returns the existing node or in-flight claim a pod is placed
// on, or "".
func (d decision) existingOf(pod string) string {
	for _, e := range d.Existing {
		for _, p := range e.Pods {
			if p.Name == pod {
				return e.Node
			}
		}
	}
	return ""
}

// unschedulable returns why a pod was not placed, or "" when it was.
func (d decision) unschedulable(pod string) string {
	for _, u := range d.Unschedulable {
		if u.Pod.Name == pod {
			return u.Reason
		}
	}
	return ""
}

// placed reports whether a pod got a place, new or existing.
func (d decision) placed(pod string) bool { return d.claimOf(pod) != nil || d.existingOf(pod) != "" }

// String renders the decision for a failure message.
func (d decision) String() string {
	var b strings.Builder
	for _, nc := range d.NodeClaims {
		names := make([]string, len(nc.Pods))
		for i, p := range nc.Pods {
			names[i] = p.Name
		}
		b.WriteString("  new " + nc.NodePool + " " + nc.InstanceType + " " + nc.Zone + " " + nc.CapacityType + ": " + strings.Join(names, ",") + "\n")
	}
	for _, e := range d.Existing {
		for _, p := range e.Pods {
			b.WriteString("  existing " + e.Node + ": " + p.Name + "\n")
		}
	}
	for _, u := range d.Unschedulable {
		b.WriteString("  unschedulable " + u.Pod.Name + ": " + u.Reason + "\n")
	}
	for _, w := range d.warnings {
		b.WriteString("  warning: " + w + "\n")
	}
	return b.String()
}

// requirement returns a NodeClaim's requirement on key, or nil.
func requirement(nc *sched.NodeClaim, key string) *karpv1.NodeSelectorRequirementWithMinValues {
	for i := range nc.Requirements {
		if nc.Requirements[i].Key == key {
			return &nc.Requirements[i]
		}
	}
	return nil
}

// expectPlaced fails unless every pod got a place.
func expectPlaced(t *testing.T, d decision, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if !d.placed(p) {
			t.Errorf("pod %s not placed: %s", p, d.unschedulable(p))
		}
	}
}

// expectNotPlaced fails if any pod got a place.
func expectNotPlaced(t *testing.T, d decision, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if d.placed(p) {
			t.Errorf("pod %s placed, want it left pending", p)
		}
	}
}

// agreeWithSimulation plays the manifests for a few virtual minutes in the
// simulator, where the provisioning controller (not plan) decides through
// the cluster model, and compares the outcome with plan's decision.
func agreeWithSimulation(t *testing.T, set *manifest.Set, types []catalog.InstanceType, policy sched.MinValuesPolicy, d decision) {
	t.Helper()
	e, err := simulator.New(simulator.Options{InstanceTypes: types, Duration: 3 * time.Minute, Seed: 1, MinValuesPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Load(ctx, &simulator.Input{Initial: set}); err != nil {
		t.Fatalf("simulator: %v", err)
	}
	rep, err := e.Run(ctx)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	if got := rep.Summary.NodeClaimsLaunched; got != len(d.NodeClaims) {
		t.Errorf("simulate launched %d NodeClaims, plan decides %d", got, len(d.NodeClaims))
	}
	if got, want := rep.Summary.CostPerHourFinal, d.TotalPrice(); math.Abs(got-want) > 5e-5 { // the report rounds to 4 decimals
		t.Errorf("simulate ends at $%.4f/h, plan's NodeClaims cost $%.4f/h", got, want)
	}
	waiting := len(d.Unschedulable) // and the pods plan says it does not provision for
	for _, w := range d.warnings {
		if strings.HasPrefix(w, "pod ") && strings.Contains(w, " is not provisioned for: ") {
			waiting++
		}
	}
	if got := rep.Summary.PodsPendingAtEnd; got != waiting {
		t.Errorf("simulate leaves %d pods pending, plan %d waiting (unschedulable or not provisioned for)", got, waiting)
	}
}
