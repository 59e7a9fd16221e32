package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func TestScaleDownKeepsTenPercentRoundedUp(t *testing.T) {
	tests := []struct {
		pods, spread, scaledA, scaledB int
	}{
		{500, 100, 50, 10},
		{2000, 400, 200, 40},
		{10000, 2000, 1000, 200},
		{7, 1, 1, 1},
	}
	for _, tt := range tests {
		w := wl(tt.pods)
		if w.spreadPods() != tt.spread || w.scaled(w.pods) != tt.scaledA || w.scaled(w.spreadPods()) != tt.scaledB {
			t.Errorf("%d pods: spread %d, scaled %d+%d; want %d, %d+%d", tt.pods, w.spreadPods(), w.scaled(w.pods), w.scaled(w.spreadPods()), tt.spread, tt.scaledA, tt.scaledB)
		}
		if w.scaledTotal() != tt.scaledA+tt.scaledB {
			t.Errorf("%d pods: scaledTotal %d", tt.pods, w.scaledTotal())
		}
	}
}

func TestNodePoolAllowsLinuxAmd64SpotAndOnDemand(t *testing.T) {
	w := workload{pods: 500, consolidateAfter: "30s", budget: "10%", scaleDownPercent: 10}
	np := w.nodePool()
	want := map[string][]string{
		corev1.LabelOSStable:     {"linux"},
		corev1.LabelArchStable:   {"amd64"},
		karpv1.LabelCapacityType: {"spot", "on-demand"},
	}
	if len(np.Spec.Template.Spec.Requirements) != len(want) {
		t.Fatalf("requirements %v", np.Spec.Template.Spec.Requirements)
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != len(want[r.Key]) {
			t.Errorf("requirement %v, want %s In %v", r, r.Key, want[r.Key])
		}
	}
	d := np.Spec.Disruption
	if d.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || d.ConsolidateAfter.Duration == nil || *d.ConsolidateAfter.Duration != 30*time.Second ||
		len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" || len(np.Spec.Limits) != 0 {
		t.Errorf("disruption %+v limits %v", d, np.Spec.Limits)
	}
}

func TestDeploymentsRequestOneCPUTwoGiBAndOnlyBSpreads(t *testing.T) {
	a, b := deployment(deployA, 500, false), deployment(deployB, 100, true)
	for _, d := range []struct {
		name     string
		replicas int32
		spread   int
	}{{deployA, 500, 0}, {deployB, 100, 1}} {
		dep := a
		if d.name == deployB {
			dep = b
		}
		spec := dep.Spec.Template.Spec
		req := spec.Containers[0].Resources.Requests
		if *dep.Spec.Replicas != d.replicas || req.Cpu().String() != "1" || req.Memory().String() != "2Gi" {
			t.Errorf("%s: replicas %d requests %v", d.name, *dep.Spec.Replicas, req)
		}
		if len(spec.TopologySpreadConstraints) != d.spread || len(spec.Tolerations) != 0 {
			t.Errorf("%s: spread %v tolerations %v", d.name, spec.TopologySpreadConstraints, spec.Tolerations)
		}
		if dep.Spec.Template.Labels[benchLabel] != "true" {
			t.Errorf("%s: pods lack the label the observer selects on", d.name)
		}
	}
	tsc := b.Spec.Template.Spec.TopologySpreadConstraints[0]
	if tsc.TopologyKey != corev1.LabelTopologyZone || tsc.MaxSkew != 1 || tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("spread %+v", tsc)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("500, 2000,10000@200")
	if err != nil {
		t.Fatal(err)
	}
	want := []size{{500, 0}, {2000, 0}, {10000, 200}}
	if len(got) != len(want) {
		t.Fatalf("parseSizes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("size %d = %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "4", "500@", "500@0", "500@x", "x@200", "500,,2000"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}
