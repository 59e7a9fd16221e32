package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func wl(pods int) workload {
	return workload{pods: pods, consolidateAfter: "0s", budget: "100%", scaleDownPercent: 10}
}

// The targets compare against Karpenter's figures for the size: 0.8× its
// Running time, 0.5× its settle time, no more $/h; at 10,000 pods absolute
// limits.
func TestChecksMarkEachTargetMetOrMissed(t *testing.T) {
	tests := []struct {
		name string
		r    result
		want map[string]bool // check name → met
	}{
		{"500 all met", result{w: wl(500), allRunning: 26 * time.Second, upCost: 12.85, settled: 100 * time.Second, downCost: 2.5},
			map[string]bool{"all Running": true, "$/h after scale-up": true, "scale-down settled": true, "$/h after scale-down": true}},
		{"500 all missed", result{w: wl(500), allRunning: 27 * time.Second, upCost: 13, settled: 123 * time.Second, downCost: 4.56},
			map[string]bool{"all Running": false, "$/h after scale-up": false, "scale-down settled": false, "$/h after scale-down": false}},
		{"2000 no scale-up price in the reference", result{w: wl(2000), allRunning: 100 * time.Second, upCost: 99, settled: 221 * time.Second, downCost: 7.68},
			map[string]bool{"all Running": true, "scale-down settled": true, "$/h after scale-down": true}},
		{"failed phases miss", result{w: wl(500), upErr: errors.New("timeout"), downErr: errors.New("not run")},
			map[string]bool{"all Running": false, "$/h after scale-up": false, "scale-down settled": false, "$/h after scale-down": false}},
		{"10000 limits", result{w: wl(10000), allRunning: 299 * time.Second, usage: procUsage{peakRSS: 501 * mib}},
			map[string]bool{"all Running": true, "peak RSS": false}},
		{"a size without reference has no targets", result{w: wl(700)}, map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, c := range tt.r.checks() {
				got[c.what] = c.met
			}
			if len(got) != len(tt.want) {
				t.Errorf("checks %v, want %v", got, tt.want)
			}
			for what, met := range tt.want {
				if m, ok := got[what]; !ok || m != met {
					t.Errorf("%s: met=%v (present %v), want met=%v", what, m, ok, met)
				}
			}
		})
	}
}

func TestRenderPutsKarpentersRowBesideEachSize(t *testing.T) {
	r := result{
		w: wl(500), allRunning: 20 * time.Second, lastCreated: 31500 * time.Millisecond, upNodes: 12, upCost: 10.5,
		settled: 90 * time.Second, downNodes: 4, downCost: 2.7, launched: 16,
		usage:    procUsage{peakRSS: 150 * mib, cpuSeconds: 42.5},
		requests: requestCounts{byMethod: map[string]int64{"GET": 600, "POST": 40, "PATCH": 300, "DELETE": 60}},
		verbs:    map[string]int64{"GET": 500, "LIST": 60, "WATCH": 40, "POST": 40, "PATCH": 300, "DELETE": 60},
	}
	var out bytes.Buffer
	render(&out, []result{r})
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 4 {
		t.Fatalf("output:\n%s", out.String())
	}
	cells := func(line string) []string {
		parts := strings.Split(strings.Trim(line, "| "), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	head, row, ref := cells(lines[0]), cells(lines[2]), cells(lines[3])
	if len(head) != 13 || len(row) != 13 || len(ref) != 13 {
		t.Fatalf("columns: header %d, row %d, reference %d; want 13 each:\n%s", len(head), len(row), len(ref), out.String())
	}
	wantRow := []string{"500+100", "20.0", "31.5", "12", "10.50", "90.0", "4", "2.70", "150", "42.5", "1000 (500/60/40/40/300/0/60)", "1.7", "62.5"}
	for i, w := range wantRow {
		if row[i] != w {
			t.Errorf("column %q = %q, want %q", head[i], row[i], w)
		}
	}
	if ref[0] != "Karpenter 500+100" || ref[1] != "33.7" || ref[5] != "245.0" || ref[7] != "2.81" {
		t.Errorf("reference row %v", ref)
	}
	if !strings.Contains(out.String(), "met    all Running: 20.0s") {
		t.Errorf("targets not listed:\n%s", out.String())
	}
}

// When the proxy's GETs do not add up to the controller's own count, the
// cell says so rather than hide it.
func TestVerbCountsFlagsAMismatchWithTheMetric(t *testing.T) {
	r := result{
		requests: requestCounts{byMethod: map[string]int64{"GET": 10}, failed: 2, failedByCode: map[string]int64{"409": 2}},
		verbs:    map[string]int64{"GET": 5, "LIST": 1},
	}
	got := r.verbCounts()
	if !strings.Contains(got, "[metric: 10 GET]") || !strings.Contains(got, "2 failed (2×409)") {
		t.Errorf("verbCounts = %q", got)
	}
}

func TestFailedPhasesRenderAsFailed(t *testing.T) {
	r := result{w: wl(2000), lastCreated: 90 * time.Second, upErr: errors.New("not done after 20m"), downErr: errors.New("not run")}
	row := r.row()
	if row[1] != "failed" || row[2] != "90.0" || row[5] != "failed" {
		t.Errorf("row %v", row)
	}
}
