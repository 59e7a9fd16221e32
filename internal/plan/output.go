package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// Output is the stable JSON shape of `nodewright plan -o json`.
type Output struct {
	NodeClaims        []NodeClaim     `json:"nodeClaims"`
	Existing          []Existing      `json:"existing"`
	Unschedulable     []Unschedulable `json:"unschedulable"`
	TotalPricePerHour float64         `json:"totalPricePerHour"`
	// SolveSeconds times the solve alone, not reading files.
	SolveSeconds float64  `json:"solveSeconds"`
	Warnings     []string `json:"warnings"`
}

// NodeClaim is one node to buy.
type NodeClaim struct {
	NodePool            string                                        `json:"nodePool"`
	InstanceType        string                                        `json:"instanceType"`
	CapacityType        string                                        `json:"capacityType"`
	Zone                string                                        `json:"zone"`
	Price               float64                                       `json:"price"`
	InstanceTypeOptions []string                                      `json:"instanceTypeOptions"`
	MinValuesRelaxed    bool                                          `json:"minValuesRelaxed"`
	Pods                []string                                      `json:"pods"`
	Requests            map[string]string                             `json:"requests"`
	Requirements        []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements"`
}

// Existing lists the pods placed on an existing node or in-flight NodeClaim.
type Existing struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

// Unschedulable is a pod no node can take, and why.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// NewOutput converts a plan.
func NewOutput(p sched.Plan, solveSeconds float64, warnings []string) Output {
	out := Output{
		NodeClaims: []NodeClaim{}, Existing: []Existing{}, Unschedulable: []Unschedulable{},
		TotalPricePerHour: p.TotalPrice(), SolveSeconds: solveSeconds, Warnings: append([]string{}, warnings...),
	}
	for _, nc := range p.NodeClaims {
		requests := map[string]string{}
		for name, q := range nc.Requests {
			requests[string(name)] = q.String()
		}
		out.NodeClaims = append(out.NodeClaims, NodeClaim{
			NodePool: nc.NodePool, InstanceType: nc.InstanceType, CapacityType: nc.CapacityType, Zone: nc.Zone,
			Price: nc.Price, InstanceTypeOptions: nc.InstanceTypeOptions, MinValuesRelaxed: nc.MinValuesRelaxed, Pods: podNames(nc.Pods),
			Requests: requests, Requirements: nc.Requirements,
		})
	}
	for _, e := range p.Existing {
		out.Existing = append(out.Existing, Existing{Node: e.Node, Pods: podNames(e.Pods)})
	}
	for _, u := range p.Unschedulable {
		out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: u.Reason})
	}
	return out
}

func podNames(pods []*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	return names
}

// WriteJSON writes the output as indented JSON.
func (o Output) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// WriteText writes a table of NodeClaims, then placements on existing
// capacity, unschedulable pods with reasons, and totals.
func (o Output) WriteText(w io.Writer) error {
	for _, warn := range o.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(o.NodeClaims) > 0 {
		fmt.Fprintln(tw, "NODEPOOL\tINSTANCE-TYPE\tZONE\tCAPACITY\t$/HOUR\tPODS\tOPTIONS\tREQUESTS")
		for _, nc := range o.NodeClaims {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\t%d\t%s\n", nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType,
				nc.Price, len(nc.Pods), len(nc.InstanceTypeOptions), requestsString(nc.Requests))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range o.Existing {
		fmt.Fprintf(w, "existing node %s takes %d pod(s): %s\n", e.Node, len(e.Pods), strings.Join(e.Pods, ", "))
	}
	for _, u := range o.Unschedulable {
		fmt.Fprintf(w, "unschedulable %s: %s\n", u.Pod, u.Reason)
	}
	placed := 0
	for _, nc := range o.NodeClaims {
		placed += len(nc.Pods)
	}
	for _, e := range o.Existing {
		placed += len(e.Pods)
	}
	rate := ""
	if o.SolveSeconds > 0 {
		rate = fmt.Sprintf(" (%.0f pods/s)", float64(placed+len(o.Unschedulable))/o.SolveSeconds)
	}
	_, err := fmt.Fprintf(w, "total: %d NodeClaim(s), $%.4f/hour; %d pod(s) placed, %d unschedulable; solved in %.3fs%s\n",
		len(o.NodeClaims), o.TotalPricePerHour, placed, len(o.Unschedulable), o.SolveSeconds, rate)
	return err
}

func requestsString(r map[string]string) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+r[k])
	}
	return strings.Join(parts, ",")
}
