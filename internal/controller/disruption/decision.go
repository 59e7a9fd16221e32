package disruption

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
)

// launching is a replace decision being carried out: persisted on its
// candidates (DisruptionReason, ReplacementsAnnotation) and their nodes
// tainted, its replacements created and awaited; the candidates go once
// every replacement is initialized.
type launching struct {
	reason            karpv1.DisruptionReason
	consolidationType string
	// candidates are the NodeClaims the decision removes.
	candidates []string
	// replacements are the names of ALL the decision's replacement
	// NodeClaims, chosen before any was created.
	replacements []string
	// planned is what to create for each replacement not yet seen to
	// exist; nil for a decision adopted after a restart (then a
	// replacement missing ends the decision).
	planned map[string]sched.NodeClaim
	// created: the replacement was seen to exist; missing afterwards, it
	// is gone.
	created  map[string]bool
	deadline time.Time
	// deleting: every replacement was initialized; the candidates are
	// being deleted (retried until done, never rolled back).
	deleting bool
	// rollingBack: the decision failed; its undoing is retried until done.
	rollingBack string
	// malformed: a recovered decision's ReplacementsAnnotation did not
	// hold; it is rolled back (replacements holds the names that were
	// well formed, and only those carrying its stamp are deleted).
	malformed error
}

// Deciding reports whether the loop holds a live decision involving the
// NodeClaim: one being validated, a replace decision launching its
// replacements (its candidates and the replacements), or one deleting its
// candidates. A karpenter.sh/disrupted taint or DisruptionReason condition
// on a NodeClaim (or its node) that is not being deleted and for which
// Deciding is false is an orphan the next pass removes. Safe to call from
// any goroutine; it reflects the state at the end of the last pass.
func (l *Loop) Deciding(nodeClaim string) bool {
	l.liveMu.RLock()
	defer l.liveMu.RUnlock()
	return l.live[nodeClaim]
}

// publish records the NodeClaims the loop's decisions hold, for Deciding.
func (l *Loop) publish() {
	live := map[string]bool{}
	if p := l.pending; p != nil {
		for _, n := range p.claims {
			live[n] = true
		}
	}
	if r := l.launching; r != nil {
		for _, n := range r.candidates {
			live[n] = true
		}
		for _, n := range r.replacements {
			live[n] = true
		}
	}
	l.liveMu.Lock()
	l.live = live
	l.liveMu.Unlock()
}

// deciding is Deciding within a pass.
func (l *Loop) deciding(name string) bool {
	if p := l.pending; p != nil && slices.Contains(p.claims, name) {
		return true
	}
	if r := l.launching; r != nil && (slices.Contains(r.candidates, name) || slices.Contains(r.replacements, name)) {
		return true
	}
	return false
}

// replacementNames chooses the replacements' names before any is created,
// deterministically from the decision (reason, candidates, time), so that
// the decision can be written down first and a Create whose answer was
// lost is found again by name.
func replacementNames(cmd disruption.Command, now time.Time) []string {
	out := make([]string, len(cmd.Replacements))
	for i, r := range cmd.Replacements {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", cmd.Reason, now.UnixNano(), i)
		for _, c := range cmd.Candidates {
			fmt.Fprintf(h, "/%s/%s", c.Name(), c.NodeClaim.UID)
		}
		out[i] = fmt.Sprintf("%s-%010x", r.NodePool, h.Sum64()&(1<<40-1))
	}
	return out
}

// launch starts a replace decision: it is written on each candidate
// (DisruptionReason, then the names of all its replacements), then the
// candidates' nodes are tainted (nothing new lands on them), then the
// replacements are created. The candidates go only once every replacement
// is initialized (create before delete). If writing the decision or
// tainting fails, the decision is rolled back at once.
func (l *Loop) launch(ctx context.Context, cmd disruption.Command, now time.Time) error {
	names := replacementNames(cmd, now)
	run := &launching{reason: cmd.Reason, consolidationType: consolidationType(cmd), replacements: names,
		planned: map[string]sched.NodeClaim{}, created: map[string]bool{}, deadline: now.Add(l.opts.ReplacementTimeout)}
	for i, n := range names {
		run.planned[n] = cmd.Replacements[i]
	}
	for _, c := range cmd.Candidates {
		run.candidates = append(run.candidates, c.Name())
	}
	l.launching = run
	for _, c := range cmd.Candidates {
		nc, err := l.markClaim(ctx, c.Name(), cmd.Reason, names)
		if err == nil && nc == nil {
			err = fmt.Errorf("nodeclaim %s is gone", c.Name())
		}
		if err == nil && nc.DeletionTimestamp != nil {
			err = fmt.Errorf("nodeclaim %s is being deleted", c.Name())
		}
		if err == nil {
			err = l.taintNode(ctx, nc.Status.NodeName, true)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("starting to replace %s for %s: %w", strings.Join(run.candidates, ","), cmd.Reason, err),
				l.rollback(ctx, run, "the decision could not be recorded"))
		}
	}
	l.metrics.DisruptionDecided(metrics.DecisionReplace, metricReason(cmd.Reason), run.consolidationType, poolsOf(cmd.Candidates))
	return l.createMissing(ctx, run)
}

// createMissing creates the replacements not seen to exist yet, by their
// chosen names. A Create that fails is tried again at the next poll (until
// the decision's deadline); one that reports the NodeClaim exists (an
// earlier Create whose answer was lost) counts as done.
func (l *Loop) createMissing(ctx context.Context, run *launching) error {
	var errs []error
	for _, name := range run.replacements {
		if run.created[name] {
			continue
		}
		planned := run.planned[name]
		np := &karpv1.NodePool{}
		if err := l.kube.Get(ctx, client.ObjectKey{Name: planned.NodePool}, np); err != nil {
			errs = append(errs, fmt.Errorf("replacing for %s: reading nodepool %s: %w", run.reason, planned.NodePool, err))
			continue
		}
		nc, err := provisioning.NodeClaimFor(np, planned)
		if err != nil {
			errs = append(errs, fmt.Errorf("replacing for %s: nodeclaim %s: %w", run.reason, name, err))
			continue
		}
		nc.GenerateName, nc.Name = "", name
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[ReplacingAnnotation] = strings.Join(run.candidates, ",")
		switch err := l.kube.Create(ctx, nc); {
		case apierrors.IsAlreadyExists(err):
			// an earlier Create whose answer was lost, or a NodeClaim the
			// decision did not make: followLaunch tells them apart
		case err != nil:
			errs = append(errs, fmt.Errorf("creating replacement nodeclaim %s in nodepool %s: %w", name, np.Name, err))
		default:
			run.created[name] = true
			l.metrics.NodeClaimCreated(nc, metricReason(run.reason))
			l.log.Info("launching a replacement", "reason", run.reason, "NodeClaim", nc.Name, "instanceType", planned.InstanceType, "price", planned.Price,
				"for", strings.Join(run.candidates, ","))
		}
	}
	return errors.Join(errs...)
}

// followLaunch carries a replace decision on: missing replacements are
// created (again); once every one is initialized the candidates are
// deleted; if one is gone, or the deadline passes first, the decision is
// rolled back.
func (l *Loop) followLaunch(ctx context.Context, now time.Time) (time.Duration, error) {
	run := l.launching
	if run.rollingBack != "" {
		return l.opts.Interval, l.rollback(ctx, run, run.rollingBack)
	}
	if run.deleting {
		return l.opts.Interval, l.finish(ctx, run)
	}
	ready, failed := 0, ""
	for _, name := range run.replacements {
		nc, err := l.readReplacement(ctx, name, false)
		switch {
		case err != nil:
			return launchPoll, err
		case nc == nil:
			if run.created[name] {
				failed = "replacement " + name + " is gone"
			} else if _, ok := run.planned[name]; !ok {
				failed = "replacement " + name + " was never created"
			}
		case !replaces(nc, run.candidates):
			failed = fmt.Sprintf("nodeclaim %s, named as a replacement, was not created by this decision (%s=%q)", name, ReplacingAnnotation, nc.Annotations[ReplacingAnnotation])
		case nc.DeletionTimestamp != nil:
			failed = "replacement " + name + " is being deleted"
		default:
			run.created[name] = true
			if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				ready++
			}
		}
	}
	switch {
	case failed == "" && ready == len(run.replacements):
		run.deleting = true
		return l.opts.Interval, l.finish(ctx, run)
	case failed == "" && !now.Before(run.deadline):
		failed = fmt.Sprintf("replacements not initialized within %s", l.opts.ReplacementTimeout)
	}
	if failed != "" {
		return l.opts.Interval, l.rollback(ctx, run, failed)
	}
	return launchPoll, l.createMissing(ctx, run)
}

// finish deletes the candidates of a decision whose replacements are all
// initialized; what fails is retried next pass.
func (l *Loop) finish(ctx context.Context, run *launching) error {
	var errs []error
	for _, name := range run.candidates {
		errs = append(errs, l.disrupt(ctx, run.reason, name))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.launching = nil
	return nil
}

// rollback gives a replace decision up: its replacements are deleted
// first (only NodeClaims stamped by this decision: see deleteReplacement),
// then the candidates are untainted and their decision cleared. A
// step that fails keeps the decision, and the rollback is retried next
// pass; until it completes the candidates stay marked, so a restart in
// between finds the decision and rolls it back again. Deleting the
// replacements is given up rollbackPatience past the decision's deadline
// (they are left as ordinary capacity, as Karpenter leaves them): a
// replacement that cannot be deleted does not keep its candidates tainted
// forever.
func (l *Loop) rollback(ctx context.Context, run *launching, why string) error {
	if run.rollingBack == "" {
		l.log.Info("replacement failed, keeping the nodes", "reason", why, "nodeclaims", run.candidates, "replacements", run.replacements)
		l.metrics.DisruptionQueueFailed(metrics.DecisionReplace, metricReason(run.reason), run.consolidationType)
	}
	run.rollingBack = why
	var errs []error
	for _, name := range run.replacements {
		if err := l.deleteReplacement(ctx, name, run.candidates); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		if l.clock.Now().Before(run.deadline.Add(rollbackPatience)) {
			return err
		}
		l.log.Error(err, "giving up deleting the replacements of a failed disruption decision: they stay as ordinary capacity, the nodes are released",
			"nodeclaims", run.candidates, "replacements", run.replacements)
		errs = nil
	}
	for _, name := range run.candidates {
		errs = append(errs, l.unmark(ctx, name))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if l.launching == run {
		l.launching = nil
	}
	return nil
}

// unmark removes a NodeClaim's disrupted taint (from its node, unless
// another controller holds it) and then its decision, reading both afresh;
// a NodeClaim being deleted keeps both.
func (l *Loop) unmark(ctx context.Context, name string) error {
	// Read past the cache: a NodeClaim this loop deleted a moment ago may
	// still look alive there while its node's taint has already been seen,
	// and untainting a node being drained lets pods back on it.
	nc := &karpv1.NodeClaim{}
	if err := l.reader.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	if !heldElsewhere(nc) {
		if err := l.taintNode(ctx, nc.Status.NodeName, false); err != nil {
			return err
		}
	}
	_, err := l.markClaim(ctx, name, "", nil)
	return err
}

// rollbackPatience is how long past a decision's deadline its rollback
// keeps trying to delete its replacements before it releases the
// candidates anyway.
const rollbackPatience = time.Minute

// readReplacement reads a replacement NodeClaim, nil if it is not found.
// Uncached (when the loop has an uncached reader) if fresh, else a
// NotFound from the cache is confirmed uncached before it is believed.
func (l *Loop) readReplacement(ctx context.Context, name string, fresh bool) (*karpv1.NodeClaim, error) {
	r := client.Reader(l.kube)
	if fresh {
		r = l.reader
	}
	nc := &karpv1.NodeClaim{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, nc)
	if apierrors.IsNotFound(err) && !fresh && l.uncached {
		err = l.reader.Get(ctx, client.ObjectKey{Name: name}, nc)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading replacement nodeclaim %s: %w", name, err)
	}
	return nc, nil
}

// deleteReplacement deletes a replacement of a decision being rolled back,
// read uncached: only if it carries ReplacingAnnotation naming the
// decision's candidates (the decision created it), and only that object
// (a UID precondition). One the decision did not create is left alone,
// with an error logged.
func (l *Loop) deleteReplacement(ctx context.Context, name string, candidates []string) error {
	nc, err := l.readReplacement(ctx, name, true)
	if err != nil || nc == nil || nc.DeletionTimestamp != nil {
		return err
	}
	if !replaces(nc, candidates) {
		l.log.Error(nil, "not deleting a NodeClaim a disruption decision names as its replacement but did not create",
			"NodeClaim", name, "annotation", ReplacingAnnotation, "value", nc.Annotations[ReplacingAnnotation], "nodeclaims", candidates)
		return nil
	}
	uid := nc.UID
	if err := client.IgnoreNotFound(l.kube.Delete(ctx, nc, client.Preconditions{UID: &uid})); err != nil {
		return fmt.Errorf("deleting replacement nodeclaim %s: %w", name, err)
	}
	return nil
}

// sweep removes, as Karpenter does at the start of every pass, the marks
// no live decision holds: the karpenter.sh/disrupted taint of a node and
// the DisruptionReason condition and ReplacementsAnnotation of its
// NodeClaim, unless the NodeClaim or node is being deleted (termination
// owns those) or another controller's persisted decision holds the node
// (see heldElsewhere). It looks only when the cluster model changed since
// a sweep that found nothing.
func (l *Loop) sweep(ctx context.Context) error {
	version := l.cluster.Version()
	if l.swept && version == l.sweptAt {
		return nil
	}
	inv := l.inventory()
	var orphans []string
	check := func(nc *karpv1.NodeClaim, node *corev1.Node) {
		if nc.DeletionTimestamp != nil || l.deciding(nc.Name) {
			return
		}
		marked := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil || nc.Annotations[ReplacementsAnnotation] != ""
		tainted := node != nil && node.DeletionTimestamp == nil && hasDisruptedTaint(node) && !heldElsewhere(nc)
		if marked || tainted {
			orphans = append(orphans, nc.Name)
		}
	}
	for _, v := range inv.Nodes {
		if v.Claim != nil {
			check(v.Claim, v.Node)
		}
	}
	for _, nc := range inv.Pending {
		check(nc, nil)
	}
	slices.Sort(orphans)
	var errs []error
	for _, name := range orphans {
		errs = append(errs, l.unorphan(ctx, name))
	}
	err := errors.Join(errs...)
	l.swept, l.sweptAt = len(orphans) == 0 && err == nil, version
	return err
}

// unorphan clears what no decision holds on a NodeClaim and its node.
func (l *Loop) unorphan(ctx context.Context, name string) error {
	if err := l.unmark(ctx, name); err != nil {
		return err
	}
	l.log.Info("removed a disruption mark no decision holds", "NodeClaim", name)
	return nil
}

// interruptionAnnotation is the annotation by which the AWS interruption
// controller persists its own decision on a NodeClaim
// (providers/aws/interruption.AnnotationInterruption; internal packages do
// not import providers): it cordons the node with the disrupted taint
// while it waits for the deadline or the replacements.
const interruptionAnnotation = "nodewright.dev/interruption"

// interruptionReplacementsAnnotation names, on a NodeClaim carrying
// interruptionAnnotation, the replacement NodeClaims planned for its pods
// (providers/aws/interruption.AnnotationInterruptionReplacements).
const interruptionReplacementsAnnotation = "nodewright.dev/interruption-replacements"

// heldElsewhere reports whether another controller's persisted decision
// holds the NodeClaim's disrupted taint: the sweep leaves it.
func heldElsewhere(nc *karpv1.NodeClaim) bool {
	_, ok := nc.Annotations[interruptionAnnotation]
	return ok
}

// execute carries out a delete decision.
func (l *Loop) execute(ctx context.Context, reason karpv1.DisruptionReason, cands []disruption.Candidate) error {
	l.metrics.DisruptionDecided(metrics.DecisionDelete, metricReason(reason), consolidationType(disruption.Command{Reason: reason, Candidates: cands}), poolsOf(cands))
	errs := make([]error, len(cands))
	workqueue.ParallelizeUntil(ctx, max(1, l.opts.Workers), len(cands), func(i int) {
		errs[i] = l.disrupt(ctx, reason, cands[i].Name())
	})
	return errors.Join(errs...)
}

// disrupt records the decision on the NodeClaim (DisruptionReason), taints
// its node and deletes it; termination drains it. If a step fails the
// marks stay until the next pass's sweep removes them (or, for a replace
// decision, until finish retries).
func (l *Loop) disrupt(ctx context.Context, reason karpv1.DisruptionReason, name string) error {
	nc, err := l.setReason(ctx, name, reason, nil)
	if nc == nil || err != nil {
		return err
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	if err := l.taintNode(ctx, nc.Status.NodeName, true); err != nil {
		return err
	}
	if node := (&corev1.Node{}); nc.Status.NodeName != "" && l.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node) == nil {
		l.recorder.Eventf(node, corev1.EventTypeNormal, ReasonDisruptionTerminating, "Disrupting node: %s", reason)
	}
	l.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonDisruptionTerminating, "Disrupting nodeclaim: %s", reason)
	if err := l.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
	}
	l.metrics.NodeClaimDisrupted(nc, metricReason(reason))
	l.log.Info("disrupting nodeclaim", "reason", reason, "NodeClaim", nc.Name)
	return nil
}
