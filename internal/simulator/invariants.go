package simulator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
)

// The invariants every simulation is checked against, as the names
// violations carry.
const (
	// InvariantOneInstance: at most one live instance per NodeClaim.
	InvariantOneInstance = "one-instance-per-nodeclaim"
	// InvariantNoOrphanInstance: no instance without a NodeClaim once
	// garbage collection has had its grace (MinInstanceAge and a round).
	InvariantNoOrphanInstance = "no-instance-without-nodeclaim"
	// InvariantLimits: a launch never takes a NodePool's launched capacity
	// above its spec.limits.
	InvariantLimits = "nodepool-limits"
	// InvariantEvictions: no eviction (or deletion by Nodewright) breaks a
	// PodDisruptionBudget or removes a karpenter.sh/do-not-disrupt pod,
	// except the forced deletion at a node's terminationGracePeriod
	// deadline.
	InvariantEvictions = "evictions-respect-pdbs-and-do-not-disrupt"
	// InvariantReplaceFirst: no candidate of a disruption decision loses
	// its NodeClaim, Node or instance (whichever of Nodewright's
	// non-forceful controllers removes it) before every replacement of
	// its decision (named by ReplacementsAnnotation or naming it by
	// ReplacingAnnotation) is Initialized.
	InvariantReplaceFirst = "replacements-initialized-before-delete"
	// InvariantNoStrayTaint: no karpenter.sh/disrupted:NoSchedule taint
	// outlives its decision.
	InvariantNoStrayTaint = "no-disrupted-taint-without-decision"
	// InvariantBudgets: per NodePool and reason, the NodeClaims
	// voluntarily disrupting at once stay within the pool's budgets.
	InvariantBudgets = "disruption-budgets"
	// InvariantPodsBound: a pod some NodePool can take does not stay
	// pending longer than PendingBound.
	InvariantPodsBound = "schedulable-pods-bound"
)

// Invariants are the names of every invariant checked, in a fixed order.
var Invariants = []string{InvariantOneInstance, InvariantNoOrphanInstance, InvariantLimits, InvariantEvictions,
	InvariantReplaceFirst, InvariantNoStrayTaint, InvariantBudgets, InvariantPodsBound}

// Bounds the invariants allow.
const (
	// PendingBound is how long a pod that some NodePool can take may stay
	// pending.
	PendingBound = 15 * time.Minute
	// TaintGrace is how long a disrupted taint may go without a live
	// decision (two disruption passes and a validation), counted from the
	// taint or from the disruption loop's (re)start, whichever is later.
	TaintGrace = 2*cdisruption.DefaultInterval + cdisruption.DefaultValidation
	// InterruptionTaintGrace is the same for a taint the interruption
	// controller put on (it waits up to 5 minutes, a scheduled change's
	// notice, before deleting the NodeClaim).
	InterruptionTaintGrace = 5*time.Minute + TaintGrace
)

// Who writes, for the checks that depend on it: controllers are named by
// their watch.Controller name, the engine's own loops by these.
const (
	actorProvisioning      = "provisioning"
	actorDisruption        = "disruption"
	actorGarbageCollection = "garbagecollection"
	actorInterruption      = "interruption"
	actorKubeScheduler     = "kube-scheduler"
	actorScenario          = "scenario"
)

// nodewrightActor: the writer is one of Nodewright's controllers (not the
// simulated cluster, cloud, kubelet or workloads, nor a scenario step).
func nodewrightActor(actor string) bool {
	switch actor {
	case "", actorKubeScheduler, actorScenario:
		return false
	}
	for _, prefix := range []string{"simulator.", "kwok.kubelet", "fakeaws.", "chaos"} {
		if strings.HasPrefix(actor, prefix) {
			return false
		}
	}
	return true
}

// Violation is an invariant found broken during a simulation.
type Violation struct {
	Invariant string `json:"invariant"`
	// At is the simulated time it was found, from the start.
	At Duration `json:"at"`
	// Objects involved: "nodeclaim/NAME", "node/NAME", "pod/NS/NAME",
	// "nodepool/NAME", "instance/PROVIDER-ID".
	Objects []string `json:"objects"`
	Message string   `json:"message"`
	// Timeline is what recently happened to those objects, oldest first.
	Timeline []string `json:"timeline"`
	// Replay is the command that plays the same run again.
	Replay string `json:"replay"`
}

const (
	// checkEvery is how often the time-driven checks run.
	checkEvery = 10 * time.Second
	// pendingEvery is how often pods pending past the bound are looked for.
	pendingEvery = time.Minute
	// historyLen events are kept per object, for violations' timelines,
	// until historyKeep after the object is gone.
	historyLen  = 10
	historyKeep = 30 * time.Minute
	// timelineLen is the most entries a violation's timeline shows.
	timelineLen = 24
)

// checker follows every object change of a simulation and checks the
// invariants: those an event breaks as it happens (evictions, deletions),
// the others once each instant has settled or every checkEvery.
type checker struct {
	e        *Engine
	found    []Violation
	recorded map[string]bool

	history map[string][]historyEvent
	gone    []goneObject

	claims map[string]*claimState
	nodes  map[string]*nodeState
	pools  map[string]*karpv1.NodePool
	// pending: live unbound pods, with their creation time.
	pending map[types.NamespacedName]time.Time
	// deleting: pods seen with a deletionTimestamp.
	deleting map[types.NamespacedName]bool
	// admitted is the pod the eviction API admitted last, whose removal
	// follows.
	admitted types.NamespacedName

	// Set this instant: pools whose launched capacity grew (and the
	// NodeClaims that launched), and whether instances or their owners
	// may have changed (dirty);
	// disrupting: NodeClaims that just started a voluntary disruption.
	launched   map[string][]string
	disrupting []startedDisrupting
	dirty      bool
	// orphans: instances without a NodeClaim, since when.
	orphans map[string]time.Time
	// cloudTook: provider IDs of instances a fault took away.
	cloudTook map[string]bool

	// loop is the disruption loop seen last, running since loopSince (a
	// restart builds a new one).
	loop      *cdisruption.Loop
	loopSince time.Time

	nextCheck, nextPending time.Time
}

type historyEvent struct {
	at   time.Duration
	text string
}

type goneObject struct {
	key string
	at  time.Time
}

func newChecker(e *Engine) *checker {
	return &checker{e: e, recorded: map[string]bool{}, history: map[string][]historyEvent{},
		claims: map[string]*claimState{}, nodes: map[string]*nodeState{}, pools: map[string]*karpv1.NodePool{},
		pending: map[types.NamespacedName]time.Time{}, deleting: map[types.NamespacedName]bool{},
		launched: map[string][]string{}, orphans: map[string]time.Time{}, cloudTook: map[string]bool{}}
}

func (c *checker) now() time.Time { return c.e.clock.Now() }

// note adds an event to an object's history.
func (c *checker) note(key, format string, args ...any) {
	h := c.history[key]
	if len(h) == historyLen {
		h = append(h[:0], h[1:]...)
	}
	c.history[key] = append(h, historyEvent{at: c.now().Sub(c.e.opts.Start), text: fmt.Sprintf(format, args...)})
}

// forget drops an object's history historyKeep after it went.
func (c *checker) forget(key string) {
	if _, ok := c.history[key]; ok {
		c.gone = append(c.gone, goneObject{key: key, at: c.now()})
	}
}

func (c *checker) prune(now time.Time) {
	n := 0
	for n < len(c.gone) && now.Sub(c.gone[n].at) > historyKeep {
		delete(c.history, c.gone[n].key)
		n++
	}
	c.gone = c.gone[n:]
}

// record adds a violation unless the same one (invariant and key) was
// recorded already.
func (c *checker) record(invariant, key string, objects []string, format string, args ...any) {
	id := invariant + "|" + key
	if c.recorded[id] {
		return
	}
	c.recorded[id] = true
	// A kwok node is named after its NodeClaim: show the claim's story
	// too, even once it is gone.
	for _, o := range objects {
		if name, ok := strings.CutPrefix(o, "node/"); ok && !slices.Contains(objects, "nodeclaim/"+name) {
			if _, known := c.history["nodeclaim/"+name]; known {
				objects = append(objects, "nodeclaim/"+name)
			}
		}
	}
	c.found = append(c.found, Violation{Invariant: invariant, At: Duration(c.now().Sub(c.e.opts.Start)), Objects: objects,
		Message: fmt.Sprintf(format, args...), Timeline: c.timeline(objects), Replay: c.replay()})
}

// timeline merges the objects' recent histories, oldest first.
func (c *checker) timeline(objects []string) []string {
	type line struct {
		at   time.Duration
		i    int
		text string
	}
	var lines []line
	for _, key := range objects {
		for _, ev := range c.history[key] {
			lines = append(lines, line{ev.at, len(lines), fmt.Sprintf("%s %s %s", ev.at, key, ev.text)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.i, b.i)) })
	if len(lines) > timelineLen {
		lines = lines[len(lines)-timelineLen:]
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

func (c *checker) replay() string {
	if c.e.opts.Replay != "" {
		return c.e.opts.Replay
	}
	return fmt.Sprintf("nodewright simulate --seed %d", c.e.opts.Seed)
}

// observe follows one object change (the informer's view).
func (c *checker) observe(obj client.Object, deleted bool) {
	switch o := obj.(type) {
	case *karpv1.NodeClaim:
		c.claimChanged(o, deleted)
	case *corev1.Node:
		c.nodeChanged(o, deleted)
	case *corev1.Pod:
		c.podChanged(o, deleted)
	case *karpv1.NodePool:
		if deleted {
			delete(c.pools, o.Name)
		} else {
			c.pools[o.Name] = o
		}
	}
}

// settled runs the checks due once an instant's reconciles have settled.
func (c *checker) settled(ctx context.Context, now time.Time) {
	c.admitted = types.NamespacedName{}
	if c.e.components.Disruption != c.loop {
		c.loop, c.loopSince = c.e.components.Disruption, now
	}
	c.checkLimits()
	periodic := !now.Before(c.nextCheck)
	if c.dirty || periodic {
		c.dirty = false
		c.checkInstances(now)
		c.checkInstancesGone()
	}
	if periodic {
		c.checkTaints(now)
		c.prune(now)
		c.nextCheck = now.Add(checkEvery)
	}
	if !now.Before(c.nextPending) {
		c.checkPending(ctx, now)
		c.nextPending = now.Add(pendingEvery)
	}
}

// finish runs the end-of-run checks and returns every violation (an empty
// list when all held).
func (c *checker) finish(ctx context.Context, end time.Time) []Violation {
	c.checkPending(ctx, end)
	if c.found == nil {
		return []Violation{}
	}
	return c.found
}

// podKey names a pod in violations and histories.
func podKey(namespace, name string) string { return "pod/" + namespace + "/" + name }

// podChanged tracks pending pods and checks removals.
func (c *checker) podChanged(p *corev1.Pod, deleted bool) {
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	key := podKey(p.Namespace, p.Name)
	if deleted || p.DeletionTimestamp != nil {
		delete(c.pending, k)
		if !c.deleting[k] {
			c.podRemoved(p, key)
		}
		if deleted {
			delete(c.deleting, k)
			c.forget(key)
		} else {
			c.deleting[k] = true
		}
		return
	}
	_, wasPending := c.pending[k]
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		delete(c.pending, k)
	case p.Spec.NodeName == "":
		if !wasPending {
			c.pending[k] = p.CreationTimestamp.Time
			c.note(key, "created, pending")
		}
	case wasPending:
		delete(c.pending, k)
		c.note(key, "bound to node %s", p.Spec.NodeName)
	}
}
