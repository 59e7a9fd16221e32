package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// reference is Karpenter's figures for one size, from the issue; zero means
// not reported.
type reference struct {
	running, settled   float64 // seconds
	upNodes, downNodes int
	upCost, downCost   float64 // $/h
	rssMiB             float64
}

// karpenter holds Karpenter's reference runs by Deployment A's size.
var karpenter = map[int]reference{
	500:  {running: 33.7, settled: 245, upNodes: 14, upCost: 12.85, downNodes: 4, downCost: 2.81},
	2000: {running: 128.1, settled: 443, downNodes: 8, downCost: 7.68, rssMiB: 265},
}

// Targets of the issue, relative to Karpenter where it has a figure.
const (
	runningRatio   = 0.8 // all Running in at most 0.8× Karpenter's time
	settleRatio    = 0.5 // scale-down settled in at most 0.5× Karpenter's
	bigSize        = 10000
	bigRunningSecs = 300 // at 10,000 pods: all Running in under 5 minutes
	bigRSSMiB      = 500 // at 10,000 pods: peak RSS under 500 MiB
)

// verbs is the column order of the request counts.
var verbs = []string{"GET", "LIST", "WATCH", "POST", "PATCH", "PUT", "DELETE"}

const mib = 1 << 20

var header = []string{"pods", "all Running (s)", "last pod created (s)", "nodes", "$/h",
	"scale-down settled (s)", "nodes", "$/h", "peak RSS MiB", "CPU s",
	"requests (" + strings.Join(verbs, "/") + ")", "req/pod", "req/node"}

// row renders one result as table cells.
func (r result) row() []string {
	cells := []string{r.w.label()}
	if r.upErr != nil {
		cells = append(cells, "failed", secs(r.lastCreated), "–", "–")
	} else {
		cells = append(cells, secs(r.allRunning), secs(r.lastCreated), fmt.Sprint(r.upNodes), dollars(r.upCost))
	}
	if r.downErr != nil {
		cells = append(cells, "failed", "–", "–")
	} else {
		cells = append(cells, secs(r.settled), fmt.Sprint(r.downNodes), dollars(r.downCost))
	}
	cells = append(cells, fmt.Sprintf("%.0f", float64(r.usage.peakRSS)/mib), fmt.Sprintf("%.1f", r.usage.cpuSeconds))
	total := r.requests.total()
	cells = append(cells, r.verbCounts(), fmt.Sprintf("%.1f", perUnit(total, r.w.totalPods())), fmt.Sprintf("%.1f", perUnit(total, r.launched)))
	return cells
}

// verbCounts renders the requests by verb, "total (GET/LIST/WATCH/...)".
// The proxy splits GETs; when its count of a method differs from the
// controller's own metric (it should not), the metric wins and the
// difference is flagged.
func (r result) verbCounts() string {
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprint(r.verbs[v])
	}
	s := fmt.Sprintf("%d (%s)", r.requests.total(), strings.Join(parts, "/"))
	gets := r.verbs["GET"] + r.verbs["LIST"] + r.verbs["WATCH"]
	if gets != r.requests.byMethod["GET"] {
		s += fmt.Sprintf(" [metric: %d GET]", r.requests.byMethod["GET"])
	}
	if r.requests.failed > 0 {
		codes := make([]string, 0, len(r.requests.failedByCode))
		for code, n := range r.requests.failedByCode {
			codes = append(codes, fmt.Sprintf("%d×%s", n, code))
		}
		sort.Strings(codes)
		s += fmt.Sprintf(", %d failed", r.requests.failed)
		if len(codes) > 0 {
			s += " (" + strings.Join(codes, " ") + ")"
		}
	}
	return s
}

// referenceRow renders Karpenter's figures for a size, or nil.
func referenceRow(w workload) []string {
	ref, ok := karpenter[w.pods]
	if !ok {
		return nil
	}
	cells := []string{"Karpenter " + w.label(), optSecs(ref.running), "–", optInt(ref.upNodes), optDollars(ref.upCost),
		optSecs(ref.settled), optInt(ref.downNodes), optDollars(ref.downCost), optInt(int(ref.rssMiB)), "–", "–", "–", "–"}
	return cells
}

// check is one target, met or missed.
type check struct {
	what, got, want string
	met             bool
}

func (c check) String() string {
	mark := "MISSED"
	if c.met {
		mark = "met"
	}
	return fmt.Sprintf("%-6s %s: %s (target %s)", mark, c.what, c.got, c.want)
}

// checks returns the targets for a result.
func (r result) checks() []check {
	var out []check
	ref, hasRef := karpenter[r.w.pods]
	upOK, downOK := r.upErr == nil, r.downErr == nil
	if hasRef && ref.running > 0 {
		limit := runningRatio * ref.running
		out = append(out, check{"all Running", gotSecs(r.allRunning.Seconds(), upOK), fmt.Sprintf("≤ %.1fs = %.1f × Karpenter's %.1fs", limit, runningRatio, ref.running),
			upOK && r.allRunning.Seconds() <= limit})
	}
	if hasRef && ref.upCost > 0 {
		out = append(out, check{"$/h after scale-up", gotDollars(r.upCost, upOK), fmt.Sprintf("≤ Karpenter's $%.2f", ref.upCost), upOK && r.upCost <= ref.upCost+0.005})
	}
	if hasRef && ref.settled > 0 {
		limit := settleRatio * ref.settled
		out = append(out, check{"scale-down settled", gotSecs(r.settled.Seconds(), downOK), fmt.Sprintf("≤ %.1fs = %.1f × Karpenter's %.0fs", limit, settleRatio, ref.settled),
			downOK && r.settled.Seconds() <= limit})
	}
	if hasRef && ref.downCost > 0 {
		out = append(out, check{"$/h after scale-down", gotDollars(r.downCost, downOK), fmt.Sprintf("≤ Karpenter's $%.2f", ref.downCost), downOK && r.downCost <= ref.downCost+0.005})
	}
	if r.w.pods == bigSize {
		out = append(out,
			check{"all Running", gotSecs(r.allRunning.Seconds(), upOK), fmt.Sprintf("< %ds", bigRunningSecs), upOK && r.allRunning.Seconds() < bigRunningSecs},
			check{"peak RSS", fmt.Sprintf("%.0f MiB", float64(r.usage.peakRSS)/mib), fmt.Sprintf("< %d MiB", bigRSSMiB), r.usage.peakRSS > 0 && float64(r.usage.peakRSS)/mib < bigRSSMiB})
	}
	return out
}

// render writes the table (each result, then Karpenter's row for its size)
// and the targets.
func render(out io.Writer, results []result) {
	rows := [][]string{header}
	for _, r := range results {
		rows = append(rows, r.row())
		if ref := referenceRow(r.w); ref != nil {
			rows = append(rows, ref)
		}
	}
	writeTable(out, rows)
	fmt.Fprintln(out)
	for _, r := range results {
		fmt.Fprintf(out, "targets at %s pods:\n", r.w.label())
		cs := r.checks()
		if len(cs) == 0 {
			fmt.Fprintln(out, "  (none at this size)")
		}
		for _, c := range cs {
			fmt.Fprintf(out, "  %s\n", c)
		}
		if r.upErr == nil {
			fmt.Fprintf(out, "  (last pod created at %.1fs, last bound to a node at %.1fs, last Running at %.1fs; %d nodes launched in all)\n",
				r.lastCreated.Seconds(), r.lastBound.Seconds(), r.allRunning.Seconds(), r.launched)
		} else {
			fmt.Fprintf(out, "  scale-up: %v\n", r.upErr)
		}
		if r.downErr != nil {
			fmt.Fprintf(out, "  scale-down: %v\n", r.downErr)
		}
	}
}

// writeTable writes a Markdown table with padded columns.
func writeTable(out io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", widths[i]-len([]rune(c))))
		}
		fmt.Fprintln(out, b.String())
	}
	line(rows[0])
	sep := make([]string, len(widths))
	for i, w := range widths {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
}

func perUnit(n int64, units int) float64 {
	if units == 0 {
		return 0
	}
	return float64(n) / float64(units)
}

func secs(d interface{ Seconds() float64 }) string { return fmt.Sprintf("%.1f", d.Seconds()) }
func dollars(v float64) string                     { return fmt.Sprintf("%.2f", v) }

func gotSecs(v float64, ok bool) string {
	if !ok {
		return "not measured"
	}
	return fmt.Sprintf("%.1fs", v)
}

func gotDollars(v float64, ok bool) string {
	if !ok {
		return "not measured"
	}
	return fmt.Sprintf("$%.2f", v)
}

func optSecs(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

func optDollars(v float64) string {
	if v == 0 {
		return "–"
	}
	return dollars(v)
}

func optInt(v int) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprint(v)
}
