package simulator

import (
	"errors"
	"fmt"
	"time"
)

// Faults name what goes wrong during a simulation, and how often. Every
// choice is drawn from generators seeded by Options.Seed, so the same
// inputs and seed give the same faults at the same instants. A nil part
// injects nothing of its kind.
type Faults struct {
	// API faults hit the writes of Nodewright's controllers (not those of
	// the simulated kube-scheduler, kubelet or workload controllers).
	API *APIFaults `json:"api,omitempty"`
	// Crashes kill Nodewright and start it again: every in-memory structure
	// is dropped and rebuilt from the API.
	Crashes *Every `json:"crashes,omitempty"`
	// Cloud faults hit Nodewright's cloud-provider calls.
	Cloud *CloudFaults `json:"cloud,omitempty"`
	// NodeNotReady stops the kubelet of a random Nodewright node (its
	// Ready condition turns Unknown, as the node lifecycle controller
	// reports it; its pods are evicted 5 minutes later).
	NodeNotReady *Every `json:"nodeNotReady,omitempty"`
	// InstanceVanished takes a random Nodewright node's instance away
	// without Nodewright asking (its Node is deleted, as the cloud node
	// lifecycle controller does).
	InstanceVanished *Every `json:"instanceVanished,omitempty"`
	// Interruptions reclaim a random spot node, as the interrupt step does
	// (with --cloud-provider aws: a spot interruption warning on the queue).
	Interruptions *Every `json:"interruptions,omitempty"`
}

// APIFaults are the rates (0 to 1, summing to at most 1) at which a write
// (create, update, patch, delete, status, eviction) fails.
type APIFaults struct {
	// ErrorRate: the write is refused with 500 Internal Server Error.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// ConflictRate: an update or patch is refused with 409 Conflict, as if
	// another writer had changed the object.
	ConflictRate float64 `json:"conflictRate,omitempty"`
	// LostRate: the write is performed, then the answer is lost (the
	// caller sees a server timeout).
	LostRate float64 `json:"lostRate,omitempty"`
}

// CloudFaults are the rates (0 to 1, summing to at most 1) at which a
// cloud-provider call fails.
type CloudFaults struct {
	// InsufficientCapacityRate: a launch is refused for want of capacity.
	InsufficientCapacityRate float64 `json:"insufficientCapacityRate,omitempty"`
	// ThrottleRate: a call is throttled.
	ThrottleRate float64 `json:"throttleRate,omitempty"`
	// ServerErrorRate: a call fails with a 5xx.
	ServerErrorRate float64 `json:"serverErrorRate,omitempty"`
	// TimeoutRate: a call times out.
	TimeoutRate float64 `json:"timeoutRate,omitempty"`
	// LaunchLostRate: a launch succeeds but its answer is lost.
	LaunchLostRate float64 `json:"launchLostRate,omitempty"`
}

// Every is a fault that happens at random instants, on average once per
// Interval (exponentially distributed gaps), from After on.
type Every struct {
	Interval Duration `json:"interval"`
	// After is the offset of the first possible occurrence (default 0).
	After Duration `json:"after,omitempty"`
}

// Fault kinds, the keys of Report.Faults.
const (
	FaultAPIError          = "api-error"
	FaultAPIConflict       = "api-conflict"
	FaultAPILost           = "api-lost"
	FaultCrash             = "crash"
	FaultCloudICE          = "cloud-insufficient-capacity"
	FaultCloudThrottle     = "cloud-throttle"
	FaultCloudServerError  = "cloud-server-error"
	FaultCloudTimeout      = "cloud-timeout"
	FaultCloudLaunchLost   = "cloud-launch-lost"
	FaultCloudCallError    = "cloud-call-error" // a termination, get or list throttled, failing or timed out
	FaultNodeNotReady      = "node-not-ready"
	FaultInstanceVanished  = "instance-vanished"
	FaultSpotInterruption  = "spot-interruption"
	defaultChaosFirstFault = 2 * time.Minute
)

// ChaosFaults are the faults `nodewright simulate --chaos SEED` turns on:
// every kind, at rates a controller must survive without harm.
func ChaosFaults() *Faults {
	first := Duration(defaultChaosFirstFault)
	return &Faults{
		API:              &APIFaults{ErrorRate: 0.03, ConflictRate: 0.03, LostRate: 0.02},
		Crashes:          &Every{Interval: Duration(20 * time.Minute), After: first},
		Cloud:            &CloudFaults{InsufficientCapacityRate: 0.05, ThrottleRate: 0.05, ServerErrorRate: 0.03, TimeoutRate: 0.03, LaunchLostRate: 0.05},
		NodeNotReady:     &Every{Interval: Duration(45 * time.Minute), After: first},
		InstanceVanished: &Every{Interval: Duration(45 * time.Minute), After: first},
		Interruptions:    &Every{Interval: Duration(30 * time.Minute), After: first},
	}
}

// WithDefaults returns f with every kind it leaves unset taken from d.
func (f *Faults) WithDefaults(d *Faults) *Faults {
	out := Faults{}
	if f != nil {
		out = *f
	}
	if d == nil {
		return &out
	}
	if out.API == nil {
		out.API = d.API
	}
	if out.Crashes == nil {
		out.Crashes = d.Crashes
	}
	if out.Cloud == nil {
		out.Cloud = d.Cloud
	}
	if out.NodeNotReady == nil {
		out.NodeNotReady = d.NodeNotReady
	}
	if out.InstanceVanished == nil {
		out.InstanceVanished = d.InstanceVanished
	}
	if out.Interruptions == nil {
		out.Interruptions = d.Interruptions
	}
	return &out
}

// kinds are the fault kinds f injects, for the report (each counted even
// when it never happened).
func (f *Faults) kinds() []string {
	if f == nil {
		return nil
	}
	var out []string
	if a := f.API; a != nil {
		out = appendIf(out, a.ErrorRate > 0, FaultAPIError)
		out = appendIf(out, a.ConflictRate > 0, FaultAPIConflict)
		out = appendIf(out, a.LostRate > 0, FaultAPILost)
	}
	out = appendIf(out, f.Crashes != nil, FaultCrash)
	if c := f.Cloud; c != nil {
		out = appendIf(out, c.InsufficientCapacityRate > 0, FaultCloudICE)
		out = appendIf(out, c.ThrottleRate > 0, FaultCloudThrottle)
		out = appendIf(out, c.ServerErrorRate > 0, FaultCloudServerError)
		out = appendIf(out, c.TimeoutRate > 0, FaultCloudTimeout)
		out = appendIf(out, c.LaunchLostRate > 0, FaultCloudLaunchLost)
		out = appendIf(out, c.ThrottleRate+c.ServerErrorRate+c.TimeoutRate > 0, FaultCloudCallError)
	}
	out = appendIf(out, f.NodeNotReady != nil, FaultNodeNotReady)
	out = appendIf(out, f.InstanceVanished != nil, FaultInstanceVanished)
	out = appendIf(out, f.Interruptions != nil, FaultSpotInterruption)
	return out
}

func appendIf(out []string, ok bool, kind string) []string {
	if ok {
		return append(out, kind)
	}
	return out
}

// validate checks every rate and interval; field is the block's path
// (spec.faults).
func (f *Faults) validate(field string) error {
	if f == nil {
		return nil
	}
	var errs []error
	rates := func(block string, named ...namedRate) {
		sum := 0.0
		for _, r := range named {
			if r.value < 0 || r.value > 1 {
				errs = append(errs, fmt.Errorf("%s.%s.%s: %g is not a rate between 0 and 1", field, block, r.name, r.value))
			}
			sum += r.value
		}
		if sum > 1 {
			errs = append(errs, fmt.Errorf("%s.%s: the rates add up to %g, more than 1", field, block, sum))
		}
	}
	if a := f.API; a != nil {
		rates("api", namedRate{"errorRate", a.ErrorRate}, namedRate{"conflictRate", a.ConflictRate}, namedRate{"lostRate", a.LostRate})
	}
	if c := f.Cloud; c != nil {
		rates("cloud", namedRate{"insufficientCapacityRate", c.InsufficientCapacityRate}, namedRate{"throttleRate", c.ThrottleRate},
			namedRate{"serverErrorRate", c.ServerErrorRate}, namedRate{"timeoutRate", c.TimeoutRate}, namedRate{"launchLostRate", c.LaunchLostRate})
	}
	for _, e := range []struct {
		name  string
		every *Every
	}{{"crashes", f.Crashes}, {"nodeNotReady", f.NodeNotReady}, {"instanceVanished", f.InstanceVanished}, {"interruptions", f.Interruptions}} {
		if e.every == nil {
			continue
		}
		if e.every.Interval <= 0 {
			errs = append(errs, fmt.Errorf("%s.%s.interval: required and positive", field, e.name))
		}
		if e.every.After < 0 {
			errs = append(errs, fmt.Errorf("%s.%s.after: %s is before the start", field, e.name, time.Duration(e.every.After)))
		}
	}
	return errors.Join(errs...)
}

type namedRate struct {
	name  string
	value float64
}
