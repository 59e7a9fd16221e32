package simulator

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/controller/garbagecollection"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// chaos is an engine's fault injection: the injector, what a restart
// rebuilds Nodewright from, and the state of the simulated world the faults
// changed (kubelets stopped, offerings refused).
type chaos struct {
	in   *injector
	conf operator.Config
	deps operator.Dependencies
	// stopped are the nodes whose kubelet a fault stopped.
	stopped map[string]bool
	// refused are the offerings scenario steps took out of capacity, for
	// the kwok provider a restart builds.
	refused map[cloudprovider.Offering]bool
}

// withFaults sets the engine up for Options.Faults: Nodewright's writes go
// through the fault client, its cloud calls through the fault decorator,
// and the kwok provider and kubelet (the cloud and the kubelets, not
// Nodewright) write to the store directly.
func (e *Engine) withFaults(conf operator.Config, deps operator.Dependencies) operator.Dependencies {
	in := newInjector(e.opts.Faults, e.opts.Seed)
	if c := e.opts.Faults.Cloud; c != nil && c.LaunchLostRate > 0 && e.aws != nil {
		// The fake AWS launches the fleet and loses the answer: the AWS
		// provider's own idempotency (its ClientToken) is what is tested.
		in.lostByCloud = true
		e.aws.LoseResponses("CreateFleet", c.LaunchLostRate, rand.New(rand.NewPCG(in.seed, 0x666c656574)))
	}
	deps.Cloud = e.store
	deps.Kube = &faultClient{Client: e.store, in: in}
	deps.WrapProvider = in.wrapProvider
	e.chaos = &chaos{in: in, conf: conf, deps: deps, stopped: map[string]bool{}, refused: map[cloudprovider.Offering]bool{}}
	return deps
}

// faultCounts are the faults injected so far, by kind (nil without
// faults).
func (e *Engine) faultCounts() map[string]int {
	if e.chaos == nil {
		return nil
	}
	out := maps.Clone(e.chaos.in.counts)
	for k, n := range e.chaos.in.cloudCounts() {
		out[k] += n
	}
	if e.aws != nil && e.chaos.in.lostByCloud {
		out[FaultCloudLaunchLost] += e.aws.Injected()["CreateFleet/lost"]
	}
	return out
}

// refuse notes an offering a step took out of capacity (on) or gave back.
func (e *Engine) refuse(o cloudprovider.Offering, on bool) {
	if e.chaos == nil {
		return
	}
	if on {
		e.chaos.refused[o] = true
	} else {
		delete(e.chaos.refused, o)
	}
}

// recover restarts Nodewright when it has crashed.
func (e *Engine) recover(ctx context.Context) error {
	if e.chaos == nil || !e.chaos.in.dead {
		return nil
	}
	return e.restart(ctx)
}

// crashPending kills and restarts Nodewright at the end of an instant when
// a crash armed at it has not happened yet (too few writes to reach its
// point).
func (e *Engine) crashPending(ctx context.Context) (bool, error) {
	if e.chaos == nil || !e.chaos.in.armed {
		return false, nil
	}
	e.chaos.in.armed, e.chaos.in.dead = false, true
	return true, e.restart(ctx)
}

// restart plays Nodewright's process starting again after a crash: the
// components are built anew (every in-memory structure of the old ones is
// gone), their queued reconciles and requeue timers are dropped, the new
// cluster model is fed every stored object and every object is enqueued to
// every controller, as informers' initial lists do. The simulated world
// (the store, the cloud, kube-scheduler, kubelets, workload controllers,
// scenario steps) carries on untouched.
func (e *Engine) restart(ctx context.Context) error {
	c := e.chaos
	c.in.dead, c.in.armed = false, false
	c.in.counts[FaultCrash]++
	e.report.fault(FaultCrash, "", "Nodewright killed and restarted; its in-memory state is rebuilt from the API")
	conf := c.conf
	conf.KWOKRefusedOfferings = slices.SortedFunc(maps.Keys(c.refused), func(a, b cloudprovider.Offering) int {
		return cmp.Or(strings.Compare(a.InstanceType, b.InstanceType), strings.Compare(a.Zone, b.Zone), strings.Compare(a.CapacityType, b.CapacityType))
	})
	comps, err := operator.Build(conf, c.deps)
	if err == nil {
		err = c.in.err
	}
	if err != nil {
		return fmt.Errorf("%s: restarting nodewright: %w", e.offset(), err)
	}
	lo, hi := e.nodewright[0], e.nodewright[1]
	if len(comps.Controllers) != hi-lo {
		return fmt.Errorf("%s: restarting nodewright: %d controllers, was %d", e.offset(), len(comps.Controllers), hi-lo)
	}
	e.components = comps
	copy(e.controllers[lo:hi], comps.Controllers)
	ours := func(w work) bool { return w.controller >= lo && w.controller < hi }
	e.queue.drop(ours)
	e.timers.drop(ours)
	for _, obj := range e.store.all() {
		operator.Observe(comps.Cluster, comps.Batcher.Trigger, obj, false)
		for i := lo; i < hi; i++ {
			for _, r := range e.controllers[i].Requests(ctx, obj) {
				e.queue.add(work{controller: i, req: r})
			}
		}
	}
	comps.Cluster.MarkSynced()
	now := e.clock.Now()
	e.gcRound = 0
	e.nextGC = now.Add(garbagecollection.Interval(0))
	e.nextResync = now.Add(provisioning.ResyncInterval)
	e.nextDisruption = now.Add(cdisruption.DefaultInterval)
	e.nextInterruption = now.Add(interruptionPoll)
	e.errs = slices.DeleteFunc(e.errs, func(err error) bool { return errors.Is(err, errCrashed) })
	return nil
}

// all returns a copy of every stored object, by kind and then namespace
// and name: what informers' initial lists hand a starting process.
func (s *store) all() []client.Object {
	gvks := slices.SortedFunc(maps.Keys(s.objects), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	var out []client.Object
	for _, gvk := range gvks {
		keys := slices.SortedFunc(maps.Keys(s.objects[gvk]), func(a, b types.NamespacedName) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		for _, k := range keys {
			out = append(out, s.objects[gvk][k].DeepCopyObject().(client.Object))
		}
	}
	return out
}

// drop removes the queued work drop says to.
func (q *workQueue) drop(drop func(work) bool) {
	q.items = slices.DeleteFunc(q.items, func(w work) bool {
		if drop(w) {
			delete(q.queued, w)
			return true
		}
		return false
	})
}

// drop removes the requeue timers of the work drop says to; actions stay.
func (t *timers) drop(drop func(work) bool) {
	t.items = slices.DeleteFunc(t.items, func(x timer) bool { return x.work != nil && drop(*x.work) })
	for w := range t.waiting {
		if drop(w) {
			delete(t.waiting, w)
		}
	}
	heap.Init(t)
}

// stopped reports whether a reconcile is the kubelet's for a node (or a
// pod on a node) whose kubelet a fault stopped: it does not happen.
func (e *Engine) stopped(_ context.Context, controller string, req reconcile.Request) bool {
	if e.chaos == nil || len(e.chaos.stopped) == 0 || !strings.HasPrefix(controller, kubeletController) {
		return false
	}
	switch controller {
	case kubeletController + ".node":
		return e.chaos.stopped[req.Name]
	case kubeletController + ".pod":
		if p := e.store.storedPod(req.NamespacedName); p != nil {
			return e.chaos.stopped[p.Spec.NodeName]
		}
	}
	return false
}

// kubeletController prefixes the names of the kwok kubelet's controllers.
const kubeletController = "kwok.kubelet"

// scheduleFaults sets the timers of the faults that happen at random
// instants; each occurrence sets the next.
func (e *Engine) scheduleFaults() {
	if e.chaos == nil {
		return
	}
	f := e.chaos.in.spec
	for _, k := range []struct {
		every *Every
		act   func(context.Context) error
	}{
		{f.Crashes, func(context.Context) error { e.chaos.in.arm(); return nil }},
		{f.NodeNotReady, e.nodeNotReady},
		{f.InstanceVanished, e.instanceVanished},
		{f.Interruptions, e.randomInterruption},
	} {
		if k.every != nil {
			e.every(e.opts.Start.Add(time.Duration(k.every.After)), k.every, k.act)
		}
	}
}

// every sets a timer for the next occurrence after from.
func (e *Engine) every(from time.Time, ev *Every, act func(context.Context) error) {
	// Whole seconds, so faults share instants with what else is due.
	gap := max(time.Duration(float64(ev.Interval)*e.chaos.in.events.ExpFloat64()).Round(time.Second), time.Second)
	at := from.Add(gap)
	e.timers.add(at, nil, func() error {
		if err := act(context.Background()); err != nil {
			return fmt.Errorf("%s: injecting a fault: %w", e.offset(), err)
		}
		e.every(at, ev, act)
		return nil
	})
}
