package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
)

// Options shape the loop.
type Options struct {
	// Interval between passes (Karpenter's 10 s).
	Interval time.Duration
	// Validation is how long a decision waits before it is checked again
	// and carried out (Karpenter's 15 s).
	Validation time.Duration
	// ReplacementTimeout bounds the wait for replacements to initialize;
	// then the candidates are untainted and the decision dropped.
	ReplacementTimeout time.Duration
	// Policy holds the consolidation safeguards (zero: DefaultPolicy).
	Policy *disruption.Policy
	// Workers is how many candidates of one command are disrupted at once
	// (0 or 1: one after another).
	Workers int
	// APIReader, when set, reads straight from the API server (the
	// manager's GetAPIReader) while the loop's client may read from a
	// cache that lags the loop's own writes: a write that lost an
	// optimistic-lock race, or found nothing to do on a cached copy, reads
	// again through it, and so do the checks that must not be fooled by a
	// lagging cache (a replacement gone, what a rollback may delete). Nil:
	// the loop's client is read.
	APIReader client.Reader
}

// Defaults for Options left zero.
const (
	DefaultInterval           = 10 * time.Second
	DefaultValidation         = 15 * time.Second
	DefaultReplacementTimeout = 10 * time.Minute
	// launchPoll is how often a pass looks at replacements launching.
	launchPoll = 2 * time.Second
	// afterCommand is how soon the pass after a command's deletions runs
	// (Karpenter requeues at once): the next command, if any, is decided
	// and validated then, not a whole Interval later. The second lets the
	// model see the command's own writes.
	afterCommand = time.Second
)

// PoolSource gives the NodePools with their instance types (the
// provisioner's view), for replacements.
type PoolSource interface {
	Pools(ctx context.Context, snap state.Snapshot) ([]sched.NodePool, map[string]*karpv1.NodePool, error)
}

// Loop makes disruption decisions and carries them out.
type Loop struct {
	kube client.Client
	// reader reads uncached (Options.APIReader, else kube); uncached: it
	// is not kube.
	reader   client.Reader
	uncached bool
	cluster  *state.Cluster
	clock    clock.Clock
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	log      logr.Logger
	pools    PoolSource
	opts     Options
	// pending is a decision waiting for its validation.
	pending *pending
	// launching is a decision waiting for its replacements to initialize.
	launching *launching
	// told is the last event published for each NodeClaim that stays, so
	// one goes out when the reason changes, not every round.
	told map[string]toldEvent
	// requests memoizes pods' requests across rounds.
	requests *disruption.RequestMemo
	// quiet: a round found nothing to do at this version of the cluster
	// model; rounds are skipped until it changes or until passes.
	quiet struct {
		version uint64
		until   time.Time
	}
	// recovered: the decisions persisted by a previous loop have been
	// looked for (once, at the first pass).
	recovered bool
	// swept: the sweep at cluster model version sweptAt found no orphaned
	// marks.
	swept   bool
	sweptAt uint64
	// live is the NodeClaims held by a decision as of the last pass, for
	// Deciding (read from other goroutines).
	liveMu sync.RWMutex
	live   map[string]bool
	// inv is the cluster model's inventory at version invAt, shared by
	// the steps of one pass.
	inv   *state.Inventory
	invAt uint64
}

// inventory is the cluster model's inventory, taken once per pass and
// model version.
func (l *Loop) inventory() state.Inventory {
	version := l.cluster.Version()
	if l.inv == nil || l.invAt != version {
		inv := l.cluster.Inventory()
		l.inv, l.invAt = &inv, version
	}
	return *l.inv
}

// quietRecheck is how long an unchanged cluster is not evaluated again
// (time alone makes a node consolidatable or a budget window open; the
// first changes its NodeClaim's condition, hence the model, the second is
// caught by this recheck).
const quietRecheck = 5 * time.Minute

type pending struct {
	reason            karpv1.DisruptionReason
	consolidationType string
	claims            []string
	replacements      int
	at                time.Time
}

// NewLoop wires the loop.
func NewLoop(kube client.Client, cluster *state.Cluster, clk clock.Clock, recorder record.EventRecorder, m *metrics.Metrics, log logr.Logger, pools PoolSource, opts Options) *Loop {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Validation <= 0 {
		opts.Validation = DefaultValidation
	}
	if opts.ReplacementTimeout <= 0 {
		opts.ReplacementTimeout = DefaultReplacementTimeout
	}
	if opts.Policy == nil {
		opts.Policy = &disruption.DefaultPolicy
	}
	reader := opts.APIReader
	if reader == nil {
		reader = kube
	}
	return &Loop{kube: kube, reader: reader, uncached: opts.APIReader != nil, cluster: cluster, clock: clk, recorder: recorder, metrics: m, log: log, pools: pools, opts: opts,
		told: map[string]toldEvent{}, requests: disruption.NewRequestMemo()}
}

// Runnable runs passes until ctx ends (on the leader only).
func (l *Loop) Runnable() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		for {
			wait, err := l.Pass(ctx)
			if err != nil {
				l.log.Error(err, "disruption")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-l.clock.After(wait):
			}
		}
	})
}

// Pass runs one round. The first pass of a Loop recovers the decisions a
// previous one persisted (finishing or rolling them back); every pass then
// removes disruption marks no live decision holds. Then a replace
// decision in progress is carried on; or a pending decision whose
// validation time has come is checked again and carried out for the
// candidates that still qualify; or a new decision is made and held for
// validation (drift acts at once). It returns how long until the next pass
// is due.
func (l *Loop) Pass(ctx context.Context) (time.Duration, error) {
	if !l.cluster.Synced() { // an incomplete model could disrupt the wrong node: decide nothing
		return l.opts.Interval, nil
	}
	defer func() {
		l.inv = nil
		l.publish()
	}()
	if !l.recovered {
		if err := l.recoverDecisions(ctx); err != nil {
			return l.opts.Interval, err
		}
		l.recovered = true
	}
	if err := l.sweep(ctx); err != nil {
		l.log.Error(err, "removing disruption marks no decision holds")
	}
	now := l.clock.Now()
	if l.launching != nil {
		return l.followLaunch(ctx, now)
	}
	if l.pending != nil && now.Before(l.pending.at) {
		return l.pending.at.Sub(now), nil
	}
	decision, err := l.decide(ctx, now)
	if err != nil {
		return l.opts.Interval, err
	}
	if p := l.pending; p != nil && decision.Command.Reason != p.reason {
		l.metrics.DisruptionValidationFailed(p.consolidationType)
	}
	if p := l.pending; p != nil && decision.Command.Reason == p.reason {
		l.pending = nil
		var still []disruption.Candidate
		for _, c := range decision.Command.Candidates {
			if slices.Contains(p.claims, c.Name()) {
				still = append(still, c)
			}
		}
		if p.replacements == 0 && len(decision.Command.Replacements) == 0 && len(still) > 0 {
			return l.afterExecute(l.execute(ctx, p.reason, still))
		}
		// A replacement holds only if the same nodes (one, or a merged
		// group) still call for one.
		if len(decision.Command.Replacements) == 0 || len(still) != len(p.claims) || len(decision.Command.Candidates) != len(p.claims) {
			l.metrics.DisruptionValidationFailed(p.consolidationType)
			l.log.Info("disruption decision no longer holds, dropped", "reason", p.reason, "nodeclaims", p.claims)
			return l.opts.Interval, nil
		}
		return launchPoll, l.launch(ctx, decision.Command, now)
	}
	l.pending = nil
	if len(decision.Command.Candidates) == 0 {
		return l.opts.Interval, nil
	}
	if decision.Command.Reason == karpv1.DisruptionReasonDrifted {
		// Drift acts at once (Karpenter validates only consolidation).
		if len(decision.Command.Replacements) > 0 {
			return launchPoll, l.launch(ctx, decision.Command, now)
		}
		return l.afterExecute(l.execute(ctx, decision.Command.Reason, decision.Command.Candidates))
	}
	p := &pending{reason: decision.Command.Reason, replacements: len(decision.Command.Replacements), at: now.Add(l.opts.Validation),
		consolidationType: consolidationType(decision.Command)}
	for _, c := range decision.Command.Candidates {
		p.claims = append(p.claims, c.Name())
	}
	l.pending = p
	l.log.Info("disruption decided, validating", "reason", p.reason, "nodeclaims", p.claims, "validateAt", p.at)
	return l.opts.Validation, nil
}

// afterExecute is when the pass after a command's deletions is due: soon
// when they were written, an Interval after a failure.
func (l *Loop) afterExecute(err error) (time.Duration, error) {
	if err != nil {
		return l.opts.Interval, err
	}
	return afterCommand, nil
}

// decide runs the methods in Karpenter's order and returns the first that
// has something to do: emptiness, then consolidation.
func (l *Loop) decide(ctx context.Context, now time.Time) (disruption.Decision, error) {
	version := l.cluster.Version()
	if version == l.quiet.version && now.Before(l.quiet.until) {
		return disruption.Decision{}, nil
	}
	cands, settled, err := l.candidates(ctx)
	if err != nil {
		return disruption.Decision{}, err
	}
	l.recordBudgets(cands, now)
	start := l.clock.Now()
	d, err := disruption.Emptiness(cands, now)
	l.evaluated(karpv1.DisruptionReasonEmpty, metrics.ConsolidationTypeEmpty, start, d)
	if err != nil || len(d.Command.Candidates) > 0 {
		return d, err
	}
	if !settled {
		// Pods are being provisioned for: the cluster is still moving.
		// Look again next round.
		return d, nil
	}
	snap := l.cluster.Snapshot()
	var pools []sched.NodePool
	if l.pools != nil {
		if pools, _, err = l.pools.Pools(ctx, snap); err != nil {
			return disruption.Decision{}, err
		}
	}
	l.requests.Sweep()
	base := sched.Input{Namespaces: snap.Namespaces, PersistentVolumeClaims: snap.PersistentVolumeClaims,
		PersistentVolumes: snap.PersistentVolumes, StorageClasses: snap.StorageClasses, DaemonSetPods: snap.DaemonSetPods,
		RequestsOf: l.requests.Of}
	start = l.clock.Now()
	d, err = disruption.Drift(cands, snap.Nodes, pools, base, now)
	l.evaluated(karpv1.DisruptionReasonDrifted, "", start, d)
	if err != nil || len(d.Command.Candidates) > 0 {
		l.explain(cands, d.Stays)
		return d, err
	}
	stays := d.Stays
	start = l.clock.Now()
	d, err = disruption.Underutilized(cands, snap.Nodes, pools, base, *l.opts.Policy, now)
	l.evaluated(karpv1.DisruptionReasonUnderutilized, consolidationType(d.Command), start, d)
	if err != nil {
		return d, err
	}
	for name, why := range stays {
		d.Stays[name] = why // a drifted node's reason comes first
	}
	l.explain(cands, d.Stays)
	if len(d.Command.Candidates) == 0 {
		// Nothing to do until the model changes, or a nomination lapses
		// (a node it held may go then, and a lapse changes no object).
		until := now.Add(quietRecheck)
		if next, ok := l.cluster.NextProvisionable(); ok && next.Before(until) {
			until = next
		}
		l.quiet.version, l.quiet.until = version, until
	}
	return d, nil
}

// candidates are every NodeClaim of a NodePool, with its node and pods;
// settled says no pod is being provisioned for.
func (l *Loop) candidates(ctx context.Context) ([]disruption.Candidate, bool, error) {
	inv := l.inventory()
	var list policyv1.PodDisruptionBudgetList
	if err := l.kube.List(ctx, &list); err != nil {
		return nil, false, fmt.Errorf("listing poddisruptionbudgets: %w", err)
	}
	budgets := make([]*policyv1.PodDisruptionBudget, len(list.Items))
	for i := range list.Items {
		budgets[i] = &list.Items[i]
	}
	pdbs := disruption.NewPDBs(budgets, inv.Pods)
	targets := l.cluster.NominationTargets()
	// Pending pods being provisioned for (a live nomination) mean the
	// cluster is still moving; a pod no NodePool can take does not hold
	// consolidation back, nor does a drain planning its pods' new room.
	settled := !l.cluster.PendingNominations()
	nominatedNode := map[string]bool{}
	for _, p := range inv.Pods {
		if p.Spec.NodeName == "" && p.Status.NominatedNodeName != "" {
			nominatedNode[p.Status.NominatedNodeName] = true
		}
	}
	awaited := interruptionReplacements(inv)
	var out []disruption.Candidate
	add := func(nc *karpv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod) {
		np := inv.NodePools[nc.Labels[karpv1.LabelNodePool]]
		if np == nil {
			return
		}
		// An interrupted node's pods are planned onto its replacements:
		// they are as good as nominated there.
		c := disruption.Candidate{NodeClaim: nc, Node: node, NodePool: np, Pods: pods, Nominated: targets[nc.Name] || awaited[nc.Name], PDBs: pdbs}
		if node != nil {
			c.Nominated = c.Nominated || nominatedNode[node.Name] || targets[node.Name]
		}
		out = append(out, c)
	}
	// A pool with NodeClaims starting is growing: its nodes are not
	// consolidated until they are up (other pools go on).
	starting := map[string]bool{}
	for _, v := range inv.Nodes {
		if v.Claim != nil {
			add(v.Claim, v.Node, v.Pods)
			if v.Claim.DeletionTimestamp == nil && !meta.IsStatusConditionTrue(v.Claim.Status.Conditions, karpv1.ConditionTypeInitialized) {
				starting[v.Claim.Labels[karpv1.LabelNodePool]] = true
			}
		}
	}
	for _, nc := range inv.Pending {
		add(nc, nil, nil)
		if nc.DeletionTimestamp == nil {
			starting[nc.Labels[karpv1.LabelNodePool]] = true
		}
	}
	for i := range out {
		out[i].PoolStarting = starting[out[i].NodePool.Name]
	}
	return out, settled, nil
}

// interruptionReplacements are the NodeClaims named as replacements by
// an interrupted NodeClaim that still exists (the interruption
// controller's persisted decision, waiting for them to come up).
func interruptionReplacements(inv state.Inventory) map[string]bool {
	out := map[string]bool{}
	note := func(nc *karpv1.NodeClaim) {
		if _, ok := nc.Annotations[interruptionAnnotation]; !ok {
			return
		}
		for _, n := range strings.Split(nc.Annotations[interruptionReplacementsAnnotation], ",") {
			if n != "" {
				out[n] = true
			}
		}
	}
	for _, v := range inv.Nodes {
		if v.Claim != nil {
			note(v.Claim)
		}
	}
	for _, nc := range inv.Pending {
		note(nc)
	}
	return out
}

// metricReason is Karpenter's label for a disruption reason.
func metricReason(r karpv1.DisruptionReason) string {
	switch r {
	case karpv1.DisruptionReasonEmpty:
		return MetricReasonEmpty
	case karpv1.DisruptionReasonDrifted:
		return "drifted"
	case karpv1.DisruptionReasonUnderutilized:
		return "underutilized"
	}
	return string(r)
}

// explain publishes why nodes stay, as events on the NodeClaim and its
// node: DisruptionBlocked when the node or its pods block any voluntary
// disruption, Unconsolidatable otherwise. A node's event goes out when its
// kind changes, or when its message changes and the last one is older
// than eventRepeat (messages name pods, which come and go).
func (l *Loop) explain(cands []disruption.Candidate, stays map[string]string) {
	now := l.clock.Now()
	seen := make(map[string]bool, len(cands))
	for _, c := range cands {
		name := c.Name()
		seen[name] = true
		why, ok := stays[name]
		if !ok || c.Nominated {
			// A nomination holds a node for seconds (a pod binding to it):
			// not worth an event, and one would hide the lasting reason
			// that follows for eventRepeat.
			continue
		}
		reason := ReasonUnconsolidatable
		if disruption.Blocked(c, now) != "" {
			reason = ReasonDisruptionBlocked
		}
		last, told := l.told[name]
		if told && (last.message == why || last.reason == reason && now.Sub(last.at) < eventRepeat) {
			continue
		}
		l.told[name] = toldEvent{reason: reason, message: why, at: now}
		l.recorder.Event(c.NodeClaim, corev1.EventTypeNormal, reason, why)
		if c.Node != nil {
			l.recorder.Event(c.Node, corev1.EventTypeNormal, reason, why)
		}
	}
	for name := range l.told {
		if !seen[name] {
			delete(l.told, name)
		}
	}
}

// eventRepeat bounds how often a node's changing reason to stay is
// published (Karpenter dedupes Unconsolidatable for 15 minutes).
const eventRepeat = 15 * time.Minute

// toldEvent is the last event published for a node that stays.
type toldEvent struct {
	reason, message string
	at              time.Time
}

// consolidationType labels a command's metrics as Karpenter does.
func consolidationType(cmd disruption.Command) string {
	switch {
	case cmd.Reason == karpv1.DisruptionReasonEmpty:
		return metrics.ConsolidationTypeEmpty
	case cmd.Reason == karpv1.DisruptionReasonDrifted:
		return ""
	case len(cmd.Candidates) > 1:
		return metrics.ConsolidationTypeMulti
	}
	return metrics.ConsolidationTypeSingle
}

// poolsOf names the NodePool of each candidate.
func poolsOf(cands []disruption.Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.NodePool.Name
	}
	return out
}

// evaluated records a method's run.
func (l *Loop) evaluated(reason karpv1.DisruptionReason, consolidationType string, start time.Time, d disruption.Decision) {
	l.metrics.DisruptionEvaluated(metricReason(reason), consolidationType, l.clock.Since(start), d.Eligible)
}

// recordBudgets sets, per pool and reason, how many nodes the budgets let
// go now.
func (l *Loop) recordBudgets(cands []disruption.Candidate, now time.Time) {
	if l.metrics == nil {
		return
	}
	members, disrupting := disruption.PoolCounts(cands)
	pools := map[string]*karpv1.NodePool{}
	for _, c := range cands {
		pools[c.NodePool.Name] = c.NodePool
	}
	for name, np := range pools {
		for _, reason := range []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized} {
			n, _, err := disruption.Allowed(np, reason, members[name], disrupting[name], now)
			if err == nil {
				l.metrics.DisruptionBudget(name, metricReason(reason), min(n, members[name]), disrupting[name])
			}
		}
	}
}
