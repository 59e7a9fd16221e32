package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/simulator"
)

// --chaos SEED turns every fault kind on for the chosen scenario and
// counts the faults by kind in the report; the seed is given once.
func TestSimulateChaos(t *testing.T) {
	out, err := run(t, "simulate", "-q", "-f", "../../examples/chaos", "--chaos", "3", "--duration", "40m", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep simulator.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	for _, kind := range []string{simulator.FaultAPIError, simulator.FaultAPIConflict, simulator.FaultAPILost, simulator.FaultCrash,
		simulator.FaultCloudICE, simulator.FaultCloudThrottle, simulator.FaultCloudServerError, simulator.FaultCloudTimeout,
		simulator.FaultCloudLaunchLost, simulator.FaultNodeNotReady, simulator.FaultInstanceVanished, simulator.FaultSpotInterruption} {
		if _, ok := rep.Faults[kind]; !ok {
			t.Errorf("faults %v: no count for %s", rep.Faults, kind)
		}
	}
	if rep.Faults[simulator.FaultAPIError] == 0 || rep.Faults[simulator.FaultCrash] == 0 {
		t.Errorf("faults %v: want API errors and crashes in 40 minutes", rep.Faults)
	}
	text, err := run(t, "simulate", "-q", "-f", "../../examples/chaos", "--chaos", "3", "--duration", "40m")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "  faults       api-conflict ") {
		t.Errorf("the text summary has no faults line:\n%s", text[max(0, len(text)-800):])
	}
	if _, err := run(t, "simulate", "-q", "--chaos", "3", "--seed", "4"); err == nil || !strings.Contains(err.Error(), "give the seed once") {
		t.Errorf("--chaos with --seed: %v, want an error", err)
	}
}
