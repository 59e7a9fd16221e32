package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON; the same inputs and seed
// give the same bytes.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTimeline writes the timeline, one decision per line.
func (r *Report) WriteTimeline(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, e := range r.Timeline {
		fmt.Fprintf(tw, "%s\t %s\n", time.Duration(e.At), strings.TrimLeft(e.describe(), " "))
	}
	return tw.Flush()
}

func (e Entry) describe() string {
	switch e.Kind {
	case EntryStep:
		return "step           " + e.Message
	case EntryLaunched:
		return fmt.Sprintf("launched       nodeclaim %s (%s): %s %s %s $%.4f/h, for %d pod(s)", e.NodeClaim, e.NodePool, e.InstanceType, e.Zone, e.CapacityType, e.Price, e.Pods)
	case EntryLaunchFailed:
		return fmt.Sprintf("launch failed  nodeclaim %s (%s): %s", e.NodeClaim, e.NodePool, e.Message)
	case EntryReady:
		return fmt.Sprintf("node ready     %s (%s)", e.Node, e.InstanceType)
	case EntryBound:
		return fmt.Sprintf("pods bound     %d to %s", e.Pods, e.Node)
	case EntryUnschedulable:
		return fmt.Sprintf("unschedulable  %d pod(s): %s", e.Pods, e.Message)
	case EntryFault:
		return strings.TrimSpace(fmt.Sprintf("fault          %s %s", e.Reason, e.Node)) + ": " + e.Message
	case EntryTerminated:
		return fmt.Sprintf("terminated     nodeclaim %s (%s) %s %s: %s", e.NodeClaim, e.NodePool, e.InstanceType, e.CapacityType, e.Reason)
	}
	return e.Kind
}

// WriteSummary writes the summary; took is the wall time the run took.
func (r *Report) WriteSummary(w io.Writer, took time.Duration) error {
	s := r.Summary
	var disruptions []string
	for _, reason := range slices.Sorted(maps.Keys(s.Disruptions)) {
		disruptions = append(disruptions, fmt.Sprintf("%s %d", reason, s.Disruptions[reason]))
	}
	if len(disruptions) == 0 {
		disruptions = []string{"none"}
	}
	_, err := fmt.Fprintf(w, `Summary: %s simulated in %s
  nodes        peak %d, at the end %d (%d NodeClaims launched)
  cost         $%.2f in total, $%.4f/h at the end
  pods         %d created, %d bound, %d still pending at the end
  pending      p50 %s, p95 %s, max %s (creation to binding)
  disruptions  %s
`, r.End.Sub(r.Start), took.Round(time.Millisecond), s.NodesPeak, s.NodesFinal, s.NodeClaimsLaunched, s.CostTotal, s.CostPerHourFinal,
		s.PodsCreated, s.PodsBound, s.PodsPendingAtEnd, seconds(s.PendingSeconds.P50), seconds(s.PendingSeconds.P95), seconds(s.PendingSeconds.Max),
		strings.Join(disruptions, ", "))
	if err != nil {
		return err
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "  errors       %d (controllers retried); first: %s\n", len(r.Errors), r.Errors[0])
	}
	if len(r.Faults) > 0 {
		var faults []string
		for _, kind := range slices.Sorted(maps.Keys(r.Faults)) {
			faults = append(faults, fmt.Sprintf("%s %d", kind, r.Faults[kind]))
		}
		fmt.Fprintf(w, "  faults       %s\n", strings.Join(faults, ", "))
	}
	return r.writeViolations(w)
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// String is a progress line.
func (p Progress) String() string {
	return fmt.Sprintf("[%s / %s] nodes %d, pending pods %d, $%.2f/h", p.Elapsed.Round(time.Second), p.Total, p.Nodes, p.Pending, p.CostPerHour)
}
