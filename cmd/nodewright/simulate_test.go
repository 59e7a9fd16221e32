package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/simulator"
)

// With no arguments, simulate runs the embedded quickstart and prints a
// timeline and a summary.
func TestSimulateRunsTheQuickstartByDefault(t *testing.T) {
	out, err := run(t, "simulate", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"launched", "node ready", "pods bound", "scale Deployment default/web to 200", "Summary: 2h0m0s simulated", "0 still pending at the end"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The seed manifests, written for AWS, simulate unchanged: web-api's pods
// run on nodes of the stable pool.
func TestSimulateSeedManifestsAsJSON(t *testing.T) {
	out, err := run(t, "simulate", "-q", "-f", "../../testdata/seed", "--duration", "10m", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep simulator.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if rep.Summary.PodsCreated != 6 || rep.Summary.PodsBound != 6 {
		t.Errorf("summary %+v: want web-api's 6 pods bound", rep.Summary)
	}
	for _, e := range rep.Timeline {
		if e.Kind == simulator.EntryLaunched && (e.NodePool != "stable" || e.CapacityType != "on-demand") {
			t.Errorf("launched %+v: web-api selects the stable pool, on-demand only", e)
		}
	}
}

func TestSimulateWritesTheHTMLReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.html")
	if _, err := run(t, "simulate", "-q", "--duration", "20m", "--report", path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "<svg"); n != 4 {
		t.Errorf("%d charts in the report, want 4", n)
	}
}

func TestSimulateRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: simulate.nodewright.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec:\n  steps:\n    - at: 5m\n      scael: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml"}, `-o "yaml"`},
		{[]string{"--duration", "-1m"}, "--duration -1m0s"},
		{[]string{"-f", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"-f", bad}, `scenario.yaml: unknown field "spec.steps[0].scael"`},
		{[]string{"--min-values-policy", "Sometimes"}, "--min-values-policy"},
	}
	for _, tc := range cases {
		_, err := run(t, append([]string{"simulate", "-q"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("simulate %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
