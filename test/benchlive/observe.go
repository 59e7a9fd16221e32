package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// observer watches the benchmark's pods and every node and keeps what the
// phases are measured from: when each pod was first seen and turned
// Running, and when the set of nodes last changed. Times are the observer's
// own (watch delivery), finer than the API's one-second timestamps.
type observer struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// pods by UID: not deleted yet, and whether Running; bound: those with
	// a node.
	running map[string]bool
	bound   map[string]bool
	// spread marks the pods of the zone-spread Deployment.
	spread map[string]bool
	// lastCreated is when the newest benchmark pod was first seen;
	// lastRunning when a pod last turned Running.
	// lastBound when a pod was last bound to a node.
	lastCreated, lastBound, lastRunning time.Time
	created                             int
	// nodes by name, and every name ever seen (nodes launched).
	nodes      map[string]*corev1.Node
	launched   map[string]bool
	lastChange time.Time

	// journal, when set, gets a line per change seen: pods created, bound
	// and Running, nodes added, their taints, readiness and removal, and
	// kube-scheduler's events, timed from the last mark (timeline.log).
	journal io.Writer
	epoch   time.Time
}

func newObserver(c clock.PassiveClock) *observer {
	return &observer{clock: c, running: map[string]bool{}, bound: map[string]bool{}, spread: map[string]bool{}, nodes: map[string]*corev1.Node{}, launched: map[string]bool{}, epoch: c.Now()}
}

// mark starts the journal's clock again at a phase, named in it.
func (o *observer) mark(phase string) {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.epoch = now
	o.record(now, "--- %s at %s", phase, now.UTC().Format(time.RFC3339Nano))
}

// record writes a journal line; o.mu is held.
func (o *observer) record(now time.Time, format string, args ...any) {
	if o.journal == nil {
		return
	}
	fmt.Fprintf(o.journal, "%8.3f "+format+"\n", append([]any{now.Sub(o.epoch).Seconds()}, args...)...)
}

// start runs the informers until ctx ends and waits for their first sync.
func (o *observer) start(ctx context.Context, cs kubernetes.Interface) error {
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = benchLabel + "=true" }))
	nodes := informers.NewSharedInformerFactory(cs, 0)
	podInf := pods.Core().V1().Pods().Informer()
	nodeInf := nodes.Core().V1().Nodes().Informer()
	events := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	eventInf := events.Core().V1().Events().Informer()
	if _, err := eventInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: o.event}); err != nil {
		return fmt.Errorf("watching events: %w", err)
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.pod(obj, false) },
		UpdateFunc: func(_, obj any) { o.pod(obj, false) },
		DeleteFunc: func(obj any) { o.pod(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.node(obj, false) },
		UpdateFunc: func(_, obj any) { o.node(obj, false) },
		DeleteFunc: func(obj any) { o.node(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	pods.Start(ctx.Done())
	nodes.Start(ctx.Done())
	events.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced, eventInf.HasSynced) {
		return fmt.Errorf("watching pods and nodes: caches never synced: %w", ctx.Err())
	}
	return nil
}

func (o *observer) pod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	uid := string(p.UID)
	was, known := o.running[uid]
	if deleted || p.DeletionTimestamp != nil {
		if known {
			o.record(now, "pod %s deleted", p.Name)
		}
		delete(o.running, uid)
		delete(o.bound, uid)
		delete(o.spread, uid)
		return
	}
	if !known {
		o.created++
		o.lastCreated = now
		if p.Labels[appLabel] == deployB {
			o.spread[uid] = true
		}
		o.record(now, "pod %s created", p.Name)
	}
	if p.Status.NominatedNodeName != "" && p.Spec.NodeName == "" {
		o.record(now, "pod %s nominated to %s", p.Name, p.Status.NominatedNodeName)
	}
	if p.Spec.NodeName != "" && !o.bound[uid] {
		o.bound[uid] = true
		o.lastBound = now
		o.record(now, "pod %s bound to %s", p.Name, p.Spec.NodeName)
	}
	isRunning := p.Status.Phase == corev1.PodRunning
	if isRunning && !was {
		o.lastRunning = now
		o.record(now, "pod %s Running", p.Name)
	}
	o.running[uid] = isRunning
}

func (o *observer) node(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	old, known := o.nodes[n.Name]
	switch {
	case deleted:
		delete(o.nodes, n.Name)
		o.lastChange = now
		o.record(now, "node %s removed", n.Name)
	default:
		if !known {
			o.lastChange = now
			o.launched[n.Name] = true
			o.record(now, "node %s added: %s %s %s", n.Name, n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.LabelCapacityType])
		}
		if was, is := nodeSummary(old), nodeSummary(n); was != is {
			o.record(now, "node %s %s", n.Name, is)
		}
		o.nodes[n.Name] = n
	}
}

// nodeSummary is what the journal says of a node: Ready, its taints, and
// whether it is being deleted ("" for none).
func nodeSummary(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	ready := "NotReady"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = "Ready"
		}
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key+":"+string(t.Effect))
	}
	sort.Strings(taints)
	out := ready + " taints[" + strings.Join(taints, ",") + "]"
	if n.DeletionTimestamp != nil {
		out += " deleting"
	}
	return out
}

// event journals kube-scheduler's and Nodewright's events on pods and
// nodes.
func (o *observer) event(obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Pod" {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.record(now, "event %s %s %s: %s", e.Source.Component, e.Reason, e.InvolvedObject.Name, e.Message)
}

// podState is a snapshot of the benchmark's pods.
type podState struct {
	live, bound, running, created int
	// spreadRunning counts the Running pods of the zone-spread Deployment.
	spreadRunning                       int
	lastCreated, lastBound, lastRunning time.Time
}

func (o *observer) pods() podState {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := podState{live: len(o.running), bound: len(o.bound), created: o.created,
		lastCreated: o.lastCreated, lastBound: o.lastBound, lastRunning: o.lastRunning}
	for uid, r := range o.running {
		if r {
			s.running++
			if o.spread[uid] {
				s.spreadRunning++
			}
		}
	}
	return s
}

// nodeState is a snapshot of the cluster's nodes.
type nodeState struct {
	count, launched int
	// draining counts nodes being deleted or tainted for disruption.
	draining int
	cost     float64
	// unpriced names nodes whose labels match no offering.
	unpriced   []string
	lastChange time.Time
}

func (o *observer) nodeSnapshot(book priceBook) nodeState {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := nodeState{count: len(o.nodes), launched: len(o.launched), lastChange: o.lastChange}
	for name, n := range o.nodes {
		if p, ok := book.price(n.Labels); ok {
			s.cost += p
		} else {
			s.unpriced = append(s.unpriced, name)
		}
		if n.DeletionTimestamp != nil || hasTaint(n, karpv1.TaintKeyDisrupted) {
			s.draining++
		}
	}
	return s
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
