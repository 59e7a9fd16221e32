package simulator

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// recorder watches the simulation (every object change, and the events
// the controllers record) and writes the report. It is also the
// controllers' record.EventRecorder.
type recorder struct {
	engine *Engine
	start  time.Time
	prices map[offering]float64

	timeline []Entry
	samples  []Sample
	errs     []string

	claims map[string]*claimInfo
	ready  map[string]bool // nodes Ready now
	// announced: nodes whose first Ready is on the timeline (a node
	// cordoned and uncordoned is not new).
	announced map[string]bool
	pods      map[types.NamespacedName]*podInfo
	// bindings this instant, per node, flushed as one entry each.
	bindings map[string]int
	// unschedulable this instant, by message.
	unschedulable map[string]int

	costRate, costTotal                                        float64
	costAt                                                     time.Time
	nodesPeak                                                  int
	disruptions                                                map[string]int
	pendingWaits                                               []float64
	podsCreated                                                int
	cpuRequested, memRequested, cpuAllocatable, memAllocatable float64
	allocatable                                                map[string][2]float64 // per Ready node: cpu, memory
}

type offering struct{ instanceType, zone, capacityType string }

type claimInfo struct {
	pool, instanceType, zone, capacityType string
	price                                  float64
	launched                               bool
	reason                                 string
}

type podInfo struct {
	created  time.Time
	node     string
	terminal bool
	cpu, mem float64
}

func newRecorder(e *Engine, instanceTypes []catalog.InstanceType) *recorder {
	r := &recorder{engine: e, start: e.opts.Start, prices: map[offering]float64{}, claims: map[string]*claimInfo{}, ready: map[string]bool{}, announced: map[string]bool{},
		pods: map[types.NamespacedName]*podInfo{}, bindings: map[string]int{}, unschedulable: map[string]int{},
		costAt: e.opts.Start, disruptions: map[string]int{}, allocatable: map[string][2]float64{}}
	for _, it := range instanceTypes {
		for _, o := range it.Offerings {
			r.prices[offering{it.Name, o.Zone, o.CapacityType}] = o.Price
		}
	}
	return r
}

func (r *recorder) at() Duration { return Duration(r.engine.clock.Now().Sub(r.start)) }

// fault notes an injected fault on the timeline.
func (r *recorder) fault(kind, node, message string) {
	r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryFault, Reason: kind, Node: node, Message: message})
}

// Step notes a scenario step on the timeline.
func (r *recorder) step(message string) {
	r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryStep, Message: message})
}

// changed follows one object change.
func (r *recorder) changed(obj client.Object, deleted bool) {
	switch o := obj.(type) {
	case *karpv1.NodeClaim:
		r.claimChanged(o, deleted)
	case *corev1.Node:
		r.nodeChanged(o, deleted)
	case *corev1.Pod:
		r.podChanged(o, deleted)
	}
}

func (r *recorder) claimChanged(nc *karpv1.NodeClaim, deleted bool) {
	info := r.claims[nc.Name]
	if info == nil {
		info = &claimInfo{pool: nc.Labels[karpv1.LabelNodePool]}
		r.claims[nc.Name] = info
	}
	if !info.launched && nc.Status.ProviderID != "" && !deleted {
		info.launched = true
		info.instanceType, info.zone, info.capacityType = nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.LabelCapacityType]
		info.price = r.prices[offering{info.instanceType, info.zone, info.capacityType}]
		r.addCost(info.price)
		r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryLaunched, NodeClaim: nc.Name, NodePool: info.pool,
			InstanceType: info.instanceType, Zone: info.zone, CapacityType: info.capacityType, Price: info.price,
			Pods: len(r.engine.components.Cluster.NominatedTo(nc.Name))})
		r.nodesPeak = max(r.nodesPeak, r.launchedCount())
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue && info.reason == "" {
		info.reason = strings.ToLower(c.Reason) // Karpenter's metric spelling: empty, drifted, underutilized
	}
	if deleted {
		if info.launched {
			r.addCost(-info.price)
		}
		reason := info.reason
		if reason == "" {
			reason = "deleted"
		}
		r.disruptions[reason]++
		r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryTerminated, NodeClaim: nc.Name, NodePool: info.pool, Node: nc.Status.NodeName,
			InstanceType: info.instanceType, Zone: info.zone, CapacityType: info.capacityType, Reason: reason})
		delete(r.claims, nc.Name)
	}
}

func (r *recorder) launchedCount() int {
	n := 0
	for _, c := range r.claims {
		if c.launched {
			n++
		}
	}
	return n
}

// addCost changes the hourly rate now, integrating the old rate so far.
func (r *recorder) addCost(delta float64) {
	now := r.engine.clock.Now()
	r.costTotal += r.costRate * now.Sub(r.costAt).Hours()
	r.costAt = now
	r.costRate += delta
	if math.Abs(r.costRate) < 1e-9 {
		r.costRate = 0
	}
}

func (r *recorder) nodeChanged(n *corev1.Node, deleted bool) {
	isReady := !deleted && takesPods(n)
	was := r.ready[n.Name]
	switch {
	case isReady && !was:
		r.ready[n.Name] = true
		cpu, mem := n.Status.Allocatable.Cpu().AsApproximateFloat64(), n.Status.Allocatable.Memory().AsApproximateFloat64()
		r.allocatable[n.Name] = [2]float64{cpu, mem}
		r.cpuAllocatable += cpu
		r.memAllocatable += mem
		if !r.announced[n.Name] {
			r.announced[n.Name] = true
			r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryReady, Node: n.Name, NodePool: n.Labels[karpv1.LabelNodePool],
				InstanceType: n.Labels[corev1.LabelInstanceTypeStable]})
		}
	case !isReady && was:
		delete(r.ready, n.Name)
		a := r.allocatable[n.Name]
		r.cpuAllocatable -= a[0]
		r.memAllocatable -= a[1]
		delete(r.allocatable, n.Name)
	}
}

func (r *recorder) podChanged(p *corev1.Pod, deleted bool) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	info := r.pods[key]
	if info == nil {
		if deleted {
			return
		}
		info = &podInfo{created: p.CreationTimestamp.Time}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		info.cpu, info.mem = req.Cpu().AsApproximateFloat64(), req.Memory().AsApproximateFloat64()
		r.pods[key] = info
		r.podsCreated++
	}
	if info.node == "" && p.Spec.NodeName != "" && !deleted {
		info.node = p.Spec.NodeName
		r.bindings[p.Spec.NodeName]++
		r.pendingWaits = append(r.pendingWaits, r.engine.clock.Now().Sub(info.created).Seconds())
		r.cpuRequested += info.cpu
		r.memRequested += info.mem
	}
	terminal := deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if terminal && !info.terminal {
		info.terminal = true
		if info.node != "" {
			r.cpuRequested -= info.cpu
			r.memRequested -= info.mem
		}
	}
	if deleted {
		delete(r.pods, key)
	}
}

// sample closes the instant: aggregated entries are written and, when the
// cluster's shape changed, a sample is taken.
func (r *recorder) sample(now time.Time) {
	for _, node := range slices.Sorted(maps.Keys(r.bindings)) {
		r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryBound, Node: node, Pods: r.bindings[node]})
	}
	clear(r.bindings)
	for _, msg := range slices.Sorted(maps.Keys(r.unschedulable)) {
		r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryUnschedulable, Pods: r.unschedulable[msg], Message: msg})
	}
	clear(r.unschedulable)

	s := Sample{At: Duration(now.Sub(r.start)), Nodes: map[string]int{}, CostPerHour: map[string]float64{}, Pending: r.pending()}
	for _, c := range r.claims {
		if c.launched {
			k := c.pool + "/" + c.capacityType
			s.Nodes[k]++
			s.CostPerHour[k] = round(s.CostPerHour[k]+c.price, 6)
		}
	}
	if r.cpuAllocatable > 0 {
		s.CPU = round(100*r.cpuRequested/r.cpuAllocatable, 2)
	}
	if r.memAllocatable > 0 {
		s.Memory = round(100*r.memRequested/r.memAllocatable, 2)
	}
	if n := len(r.samples); n > 0 {
		last := r.samples[n-1]
		if maps.Equal(last.Nodes, s.Nodes) && maps.Equal(last.CostPerHour, s.CostPerHour) && last.Pending == s.Pending && last.CPU == s.CPU && last.Memory == s.Memory {
			return
		}
		if last.At == s.At {
			r.samples = r.samples[:n-1]
		}
	}
	r.samples = append(r.samples, s)
}

func (r *recorder) pending() int {
	n := 0
	for _, p := range r.pods {
		if p.node == "" && !p.terminal {
			n++
		}
	}
	return n
}

func (r *recorder) progress(now time.Time) Progress {
	return Progress{Elapsed: now.Sub(r.start), Total: r.engine.opts.Duration, Nodes: r.launchedCount(), Pending: r.pending(), CostPerHour: r.costRate}
}

func (r *recorder) reconcileError(controller string, req reconcile.Request, err error) {
	if len(r.errs) < 100 {
		// The lines of a joined error are sorted: a controller that loops
		// over a map joins them in an order Go randomises.
		lines := strings.Split(err.Error(), "\n")
		slices.Sort(lines)
		r.errs = append(r.errs, fmt.Sprintf("%s: %s %s: %s", time.Duration(r.at()), controller, req.String(), strings.Join(lines, "\n")))
	}
}

// finish writes the summary.
func (r *recorder) finish(end time.Time, errs []error) *Report {
	r.addCost(0)
	for _, err := range errs {
		r.errs = append(r.errs, err.Error())
	}
	waits := slices.Clone(r.pendingWaits)
	sort.Float64s(waits)
	pct := func(p float64) float64 {
		if len(waits) == 0 {
			return 0
		}
		return round(waits[int(math.Ceil(p*float64(len(waits))))-1], 3)
	}
	rep := &Report{Start: r.start, End: end, Timeline: r.timeline, Samples: r.samples, Errors: r.errs, Summary: Summary{
		NodesPeak: r.nodesPeak, NodesFinal: r.launchedCount(), CostTotal: round(r.costTotal, 4), CostPerHourFinal: round(r.costRate, 4),
		PodsCreated: r.podsCreated, PodsBound: len(r.pendingWaits), PodsPendingAtEnd: r.pending(), Disruptions: r.disruptions,
		PendingSeconds: Pending{P50: pct(0.5), P95: pct(0.95), Max: pct(1)},
	}}
	for _, e := range r.timeline {
		if e.Kind == EntryLaunched {
			rep.Summary.NodeClaimsLaunched++
		}
	}
	return rep
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// Event records an event the controllers emit: launch failures and
// liveness explain why a NodeClaim goes, FailedScheduling why pods wait.
func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	switch o := object.(type) {
	case *karpv1.NodeClaim:
		info := r.claims[o.Name]
		if info == nil {
			return
		}
		switch reason {
		case "InsufficientCapacityError":
			info.reason = "insufficient_capacity"
			r.timeline = append(r.timeline, Entry{At: r.at(), Kind: EntryLaunchFailed, NodeClaim: o.Name, NodePool: info.pool, Reason: reason, Message: message})
		case "NodeClassNotReady":
			info.reason = "nodeclass_not_ready"
		case "Liveness":
			info.reason = "liveness"
		case "TerminatingOnInterruption":
			info.reason = ReasonInterrupted
		}
	case *corev1.Pod:
		if reason == "FailedScheduling" && eventtype == corev1.EventTypeWarning {
			r.unschedulable[message]++
		}
	}
}

// Eventf formats and records an event.
func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf records an event; annotations are dropped.
func (r *recorder) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(object, eventtype, reason, messageFmt, args...)
}
