package main

import (
	"context"
	"fmt"
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
}

func newObserver(c clock.PassiveClock) *observer {
	return &observer{clock: c, running: map[string]bool{}, bound: map[string]bool{}, spread: map[string]bool{}, nodes: map[string]*corev1.Node{}, launched: map[string]bool{}}
}

// start runs the informers until ctx ends and waits for their first sync.
func (o *observer) start(ctx context.Context, cs kubernetes.Interface) error {
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = benchLabel + "=true" }))
	nodes := informers.NewSharedInformerFactory(cs, 0)
	podInf := pods.Core().V1().Pods().Informer()
	nodeInf := nodes.Core().V1().Nodes().Informer()
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
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
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
	}
	if p.Spec.NodeName != "" && !o.bound[uid] {
		o.bound[uid] = true
		o.lastBound = now
	}
	isRunning := p.Status.Phase == corev1.PodRunning
	if isRunning && !was {
		o.lastRunning = now
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
	_, known := o.nodes[n.Name]
	switch {
	case deleted:
		delete(o.nodes, n.Name)
		o.lastChange = now
	default:
		if !known {
			o.lastChange = now
			o.launched[n.Name] = true
		}
		o.nodes[n.Name] = n
	}
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
