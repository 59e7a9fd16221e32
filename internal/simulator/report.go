package simulator

import (
	"encoding/json"
	"fmt"
	"time"
)

// Report is what a simulation did: a summary, the decisions in order, and
// the cluster's shape over time. It marshals to stable JSON.
type Report struct {
	// Start and End are the simulated times.
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Summary  Summary   `json:"summary"`
	Timeline []Entry   `json:"timeline"`
	Samples  []Sample  `json:"samples"`
	// Errors the controllers returned (they retry, as live).
	Errors []string `json:"errors,omitempty"`
	// Violations are the invariants found broken (see invariants.go), in
	// the order found; empty when every invariant held.
	Violations []Violation `json:"violations"`
	// Faults injected, by kind (see Faults); absent without faults.
	Faults map[string]int `json:"faults,omitempty"`
}

// Summary sums a simulation up.
type Summary struct {
	NodesPeak          int            `json:"nodesPeak"`
	NodesFinal         int            `json:"nodesFinal"`
	NodeClaimsLaunched int            `json:"nodeClaimsLaunched"`
	CostTotal          float64        `json:"costTotal"`        // dollars spent on instances
	CostPerHourFinal   float64        `json:"costPerHourFinal"` // dollars per hour at the end
	PodsCreated        int            `json:"podsCreated"`      // pods that ever existed
	PodsBound          int            `json:"podsBound"`        // pods that got a node
	PodsPendingAtEnd   int            `json:"podsPendingAtEnd"` // pods still waiting at the end
	PendingSeconds     Pending        `json:"pendingSeconds"`   // creation to binding, over bound pods
	Disruptions        map[string]int `json:"disruptions"`      // NodeClaims removed, by reason
}

// Pending are percentiles of how long pods waited for a node.
type Pending struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

// Entry is one decision or consequence on the timeline.
type Entry struct {
	// At is the offset from the start.
	At           Duration `json:"at"`
	Kind         string   `json:"kind"`
	NodeClaim    string   `json:"nodeClaim,omitempty"`
	Node         string   `json:"node,omitempty"`
	NodePool     string   `json:"nodePool,omitempty"`
	InstanceType string   `json:"instanceType,omitempty"`
	Zone         string   `json:"zone,omitempty"`
	CapacityType string   `json:"capacityType,omitempty"`
	Price        float64  `json:"price,omitempty"`
	Pods         int      `json:"pods,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Message      string   `json:"message,omitempty"`
}

// Timeline entry kinds.
const (
	EntryStep          = "step"          // a scenario step ran
	EntryLaunched      = "launched"      // a NodeClaim got an instance
	EntryLaunchFailed  = "launch-failed" // a launch was refused
	EntryReady         = "ready"         // its node turned Ready
	EntryBound         = "bound"         // pods bound to a node
	EntryUnschedulable = "unschedulable" // pods Nodewright found no place for
	EntryTerminated    = "terminated"    // a NodeClaim is gone
	EntryFault         = "fault"         // a fault was injected (crash, node failure, interruption)
)

// Sample is the cluster at one moment.
type Sample struct {
	At Duration `json:"at"`
	// Nodes and CostPerHour by "nodepool/capacity-type".
	Nodes       map[string]int     `json:"nodes"`
	CostPerHour map[string]float64 `json:"costPerHour"`
	Pending     int                `json:"pending"`
	// CPU and Memory are the requests of bound pods over the allocatable
	// of Ready nodes, in percent.
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"`
}

// Duration marshals as Go's duration string ("1h2m3s").
type Duration time.Duration

// MarshalText writes the duration as a string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalJSON reads a duration string ("10m") or the number 0.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration such as \"10m\" or \"1h30m\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (such as \"10m\" or \"1h30m\")", s)
	}
	*d = Duration(v)
	return nil
}

// Progress is the simulation's state for a progress line.
type Progress struct {
	Elapsed     time.Duration
	Total       time.Duration
	Nodes       int
	Pending     int
	CostPerHour float64
}

func timeDuration(d Duration) time.Duration { return time.Duration(d) }
