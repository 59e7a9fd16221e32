package simulator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/controller/garbagecollection"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// Options shape a simulation.
type Options struct {
	// InstanceTypes the kwok provider launches.
	InstanceTypes []catalog.InstanceType
	// Duration of simulated time.
	Duration time.Duration
	// Seed drives every random choice (generated names).
	Seed int64
	// BootDelay is how long a launched node takes to turn Ready.
	BootDelay time.Duration
	// BatchIdle and BatchMax shape provisioning windows (1 s, 10 s).
	BatchIdle, BatchMax time.Duration
	MinValuesPolicy     sched.MinValuesPolicy
	// Start is the virtual time the simulation starts at.
	Start time.Time
	// Progress, when set, is called as simulated time passes.
	Progress func(Progress)
	// Logger receives the controllers' logs; zero: discarded.
	Logger logr.Logger
	// CloudProvider is "kwok" (default: NodePools naming a KWOKNodeClass or
	// an EC2NodeClass launch kwok nodes) or "aws": the AWS provider and
	// the EC2NodeClass controller against an in-process fake AWS selling
	// InstanceTypes, for NodePools naming an EC2NodeClass.
	CloudProvider string
	// ClusterName is the aws fake account's karpenter.sh/discovery tag
	// and interruption queue (default "demo").
	ClusterName string
	// Replay is the command that replays this run, printed with each
	// invariant violation (default: the seed).
	Replay string
	// Faults to inject (nil: none), drawn from Seed; see Faults.
	Faults *Faults
}

// Defaults for Options left zero.
var (
	DefaultStart     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	DefaultBootDelay = 30 * time.Second
	DefaultDuration  = time.Hour
)

// SimulateGCPercent is the garbage-collection target `nodewright
// simulate` runs with: a simulation allocates heavily (every read is a
// copy, every solve a fresh state) while its live heap stays small, so
// collecting less often buys back most of the quarter of its CPU the
// collector took. Measured on examples/daily: 66 s and 451 MB resident at
// the default, 55 s and 974 MB at 1000.
const SimulateGCPercent = 1000

// maxReconcilesPerInstant guards against controllers that never settle.
const maxReconcilesPerInstant = 1_000_000

// Engine runs Nodewright's controllers on an in-memory cluster.
type Engine struct {
	opts        Options
	clock       *clocktesting.FakeClock
	store       *store
	components  *operator.Components
	controllers []watch.Controller
	queue       workQueue
	timers      timers
	// scheduleDue: something changed that kube-scheduler would react to.
	scheduleDue bool
	gcRound     int
	nextGC      time.Time
	nextResync  time.Time
	// nextDisruption is when the disruption loop's next pass is due.
	nextDisruption time.Time
	// aws is the in-process fake AWS (CloudProvider "aws"), and
	// nextInterruption when its interruption queue is polled next.
	aws              *fake.Server
	nextInterruption time.Time
	report           *recorder
	errs             []error
	// nodewright is the range of controllers that are Nodewright's
	// (components.Controllers), rebuilt by a simulated restart.
	nodewright [2]int
	// inv checks the invariants as the simulation runs; actor is who is
	// writing now (a controller's name, see actor* constants), for it.
	inv   *checker
	actor string
	// chaos is the fault injection (nil without Options.Faults); see
	// chaos.go.
	chaos *chaos
}

// New builds an engine: an empty cluster with the controllers running.
func New(opts Options) (*Engine, error) {
	if opts.Start.IsZero() {
		opts.Start = DefaultStart
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.BootDelay == 0 {
		opts.BootDelay = DefaultBootDelay
	}
	if opts.BatchIdle == 0 {
		opts.BatchIdle = time.Second
	}
	if opts.BatchMax == 0 {
		opts.BatchMax = 10 * time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.ClusterName == "" {
		opts.ClusterName = "demo"
	}
	scheme, err := operator.Scheme()
	if err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, clock: clocktesting.NewFakeClock(opts.Start)}
	e.store = newStore(scheme, restMapper(scheme), e.clock, opts.Seed)
	if e.store.defaults, err = loadCRDDefaults(); err != nil {
		return nil, err
	}
	if err := operator.IndexFields(context.Background(), e.store); err != nil {
		return nil, err
	}
	if err := indexPodsByController(context.Background(), e.store); err != nil {
		return nil, err
	}
	e.report = newRecorder(e, opts.InstanceTypes)
	e.inv = newChecker(e)
	conf := operator.Config{
		CloudProvider: "kwok", InstanceTypes: opts.InstanceTypes, KWOKKubelet: true, RegistrationDelay: opts.BootDelay, KWOKServesEC2NodeClasses: true,
		KWOKHeartbeat: time.Hour, // heartbeats change nothing here but cost a write each
		BatchIdle:     opts.BatchIdle, BatchMax: opts.BatchMax, MinValuesPolicy: opts.MinValuesPolicy,
		OrphanInstanceAge: garbagecollection.MinInstanceAge, Logger: opts.Logger, Clock: e.clock,
	}
	var machines *fake.Machines
	switch opts.CloudProvider {
	case "", "kwok":
	case "aws":
		if e.aws, err = fake.New(fake.Options{InstanceTypes: opts.InstanceTypes, World: fake.DefaultWorld(opts.ClusterName), Clock: e.clock}); err != nil {
			return nil, err
		}
		// The fake's instances register after the boot delay and turn
		// Ready at once; the kwok kubelet plays theirs.
		machines = e.aws.Machines(e.store, e.clock)
		machines.BootDelay = opts.BootDelay
		conf.CloudProvider, conf.RegistrationDelay, conf.KWOKKubeletProviderIDPrefixes = "aws", 0, []string{"aws:///"}
		conf.AWS = operator.AWSConfig{SDK: fake.InProcessConfig(e.aws), ClusterName: opts.ClusterName, ClusterEndpoint: "https://simulated.invalid",
			KubernetesVersion: "1.37", InterruptionQueue: opts.ClusterName, ShortPoll: true}
	default:
		return nil, fmt.Errorf("cloud provider %q: want kwok or aws", opts.CloudProvider)
	}
	deps := operator.Dependencies{Kube: e.store, Recorder: e.report}
	if opts.Faults != nil {
		deps = e.withFaults(conf, deps)
	}
	e.components, err = operator.Build(conf, deps)
	if err == nil && e.chaos != nil {
		err = e.chaos.in.err
	}
	if err != nil {
		return nil, err
	}
	// The store is empty and hands every write to the model as it happens
	// (changed): the model is complete from here on.
	e.components.Cluster.MarkSynced()
	if machines != nil {
		e.controllers = append(e.controllers, machines.Controllers()...)
	}
	e.nodewright = [2]int{len(e.controllers), len(e.controllers) + len(e.components.Controllers)}
	e.controllers = append(e.controllers, e.components.Controllers...)
	e.controllers = append(e.controllers, workloadControllers(e)...)
	e.store.changed = e.changed
	e.store.evictionAllowed = e.admitEviction
	e.nextGC = opts.Start.Add(garbagecollection.Interval(0))
	e.nextResync = opts.Start.Add(provisioning.ResyncInterval)
	e.nextDisruption = opts.Start.Add(cdisruption.DefaultInterval)
	e.nextInterruption = opts.Start.Add(interruptionPoll)
	e.scheduleFaults()
	return e, nil
}

// interruptionPoll is how often the simulated AWS's interruption queue is
// polled.
const interruptionPoll = 5 * time.Second

// Client is the in-memory API, for scenario steps and tests.
func (e *Engine) Client() client.Client { return e.store }

// Explain says what disruption would do with a node at the simulated time
// (after Run: at the end of the simulation), as `nodewright explain node`
// does on a live cluster.
func (e *Engine) Explain(ctx context.Context, node string) (cdisruption.Explanation, error) {
	return e.components.Disruption.Explain(ctx, node)
}

// Now is the simulated time.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// At schedules action at simulated offset d from the start; an error it
// returns stops the simulation.
func (e *Engine) At(d time.Duration, action func() error) {
	e.timers.add(e.opts.Start.Add(d), nil, action)
}

// changed is the informer: every object written reaches the cluster model,
// the controllers watching it, and the report.
func (e *Engine) changed(obj client.Object, deleted bool) {
	operator.Observe(e.components.Cluster, e.components.Batcher.Trigger, obj, deleted)
	ctx := context.Background()
	for i, c := range e.controllers {
		for _, r := range c.Requests(ctx, obj) {
			e.queue.add(work{controller: i, req: r})
		}
	}
	switch o := obj.(type) {
	case *corev1.Node:
		e.scheduleDue = true
	case *corev1.Pod:
		if deleted || o.Spec.NodeName == "" && !attempted(o) || o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
			e.scheduleDue = true // a new pod to place, or room freed
		}
	}
	e.report.changed(obj, deleted)
	e.inv.observe(obj, deleted)
}

// attempted: kube-scheduler has tried to place the pod already (a gated
// pod has not been tried: once its gates go, it is).
func attempted(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason != corev1.PodReasonSchedulingGated {
			return true
		}
	}
	return false
}

// nextLook is when provisioning looks again without a trigger: the next
// resync, or just after a pod becomes provisionable with no event to say
// so (provisioning.Loop).
func (e *Engine) nextLook() time.Time {
	if at, ok := e.components.Cluster.NextProvisionable(); ok && at.Add(time.Millisecond).Before(e.nextResync) {
		return at.Add(time.Millisecond)
	}
	return e.nextResync
}

// Run plays the simulation to its end and returns the report.
func (e *Engine) Run(ctx context.Context) (*Report, error) {
	end := e.opts.Start.Add(e.opts.Duration)
	for {
		if err := e.drain(ctx); err != nil {
			return nil, err
		}
		now := e.clock.Now()
		if closeAt, open := e.components.Batcher.CloseAt(); open && !closeAt.After(now) {
			e.components.Batcher.Close()
			e.actor = actorProvisioning
			_, err := e.components.Provisioner.Provision(ctx)
			e.actor = ""
			if err != nil {
				e.errs = append(e.errs, fmt.Errorf("%s: provisioning: %w", e.offset(), err))
			}
			if err := e.recover(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if e.scheduleDue {
			e.scheduleDue = false
			e.actor = actorKubeScheduler
			err := e.schedule(ctx)
			e.actor = ""
			if err != nil {
				return nil, err
			}
			continue
		}
		if crashed, err := e.crashPending(ctx); err != nil || crashed {
			if err != nil {
				return nil, err
			}
			continue
		}
		e.inv.settled(ctx, now)
		e.report.sample(now)
		next := e.nextGC
		// The look is chosen before the clock moves: once it has, a lapse
		// it was chosen for is past and no longer next.
		look := e.nextLook()
		if look.Before(next) {
			next = look
		}
		if e.nextDisruption.Before(next) {
			next = e.nextDisruption
		}
		if e.components.Interruption != nil && e.nextInterruption.Before(next) {
			next = e.nextInterruption
		}
		if t, ok := e.timers.next(); ok && t.Before(next) {
			next = t
		}
		if closeAt, open := e.components.Batcher.CloseAt(); open && closeAt.Before(next) {
			next = closeAt
		}
		if next.After(end) {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.clock.SetTime(next)
		for _, t := range e.timers.due(next) {
			if t.work != nil {
				e.queue.add(*t.work)
				continue
			}
			e.actor = actorScenario
			err := t.action()
			e.actor = ""
			if err != nil {
				return nil, err
			}
		}
		if !next.Before(e.nextGC) {
			e.gcRound++
			e.actor = actorGarbageCollection
			_, err := e.components.GarbageCollector.Collect(ctx)
			e.actor = ""
			if err != nil {
				e.errs = append(e.errs, err)
			}
			e.nextGC = next.Add(garbagecollection.After(e.gcRound, err))
			if err := e.recover(ctx); err != nil {
				return nil, err
			}
		}
		if !next.Before(e.nextDisruption) {
			e.actor = actorDisruption
			wait, err := e.components.Disruption.Pass(ctx)
			e.actor = ""
			if err != nil {
				e.errs = append(e.errs, fmt.Errorf("%s: disruption: %w", e.offset(), err))
			}
			e.nextDisruption = next.Add(wait)
			if err := e.recover(ctx); err != nil {
				return nil, err
			}
		}
		if e.components.Interruption != nil && !next.Before(e.nextInterruption) {
			e.actor = actorInterruption
			err := e.components.Interruption.PollOnce(ctx)
			e.actor = ""
			if err != nil {
				e.errs = append(e.errs, fmt.Errorf("%s: interruption: %w", e.offset(), err))
			}
			e.nextInterruption = next.Add(interruptionPoll)
			if err := e.recover(ctx); err != nil {
				return nil, err
			}
		}
		if !next.Before(look) {
			// As provisioning.Loop: every resync, and just after a pod
			// becomes provisionable with no event.
			if _, open := e.components.Batcher.CloseAt(); !open && e.components.Cluster.AnyProvisionable() {
				e.components.Batcher.Trigger()
			}
			if !next.Before(e.nextResync) {
				e.nextResync = next.Add(provisioning.ResyncInterval)
			}
		}
		if e.opts.Progress != nil {
			e.opts.Progress(e.report.progress(next))
		}
	}
	e.clock.SetTime(end)
	e.inv.settled(ctx, end)
	e.report.sample(end)
	rep := e.report.finish(end, e.errs)
	rep.Faults = e.faultCounts()
	rep.Violations = e.inv.finish(ctx, end)
	return rep, nil
}

// drain runs every queued reconcile at the current instant.
func (e *Engine) drain(ctx context.Context) error {
	for n := 0; e.queue.len() > 0; n++ {
		if n == maxReconcilesPerInstant {
			return fmt.Errorf("%s: the controllers did not settle after %d reconciles", e.offset(), n)
		}
		w, _ := e.queue.pop()
		c := e.controllers[w.controller]
		if e.stopped(ctx, c.Name, w.req) {
			continue // a kubelet that a fault stopped
		}
		e.actor = c.Name
		res, err := c.Reconciler.Reconcile(ctx, w.req)
		e.actor = ""
		switch {
		case err != nil:
			if !errors.Is(err, context.Canceled) {
				e.report.reconcileError(c.Name, w.req, err)
			}
			e.timers.add(e.clock.Now().Add(time.Second), &w, nil)
		case res.RequeueAfter > 0:
			e.timers.add(e.clock.Now().Add(res.RequeueAfter), &w, nil)
		case res.Requeue: //nolint:staticcheck // controllers may still ask for it
			e.timers.add(e.clock.Now().Add(10*time.Millisecond), &w, nil)
		}
		if err := e.recover(ctx); err != nil {
			return err
		}
	}
	return nil
}

// offset is the simulated time since the start, for messages.
func (e *Engine) offset() string {
	return e.clock.Now().Sub(e.opts.Start).String()
}
