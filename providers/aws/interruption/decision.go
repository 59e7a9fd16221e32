package interruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
)

// The annotations that hold an interruption decision on its NodeClaim. The
// decision lives in the API, not in the controller's memory nor in the SQS
// message (deleted only once they are written), so a restarted controller
// finds every decision under way and carries it out.
const (
	// AnnotationInterruption is the Kind of the interruption the NodeClaim
	// goes for (e.g. "scheduled_change"). Its presence is the decision: the
	// node is cordoned, its pods get replacement capacity, and the
	// NodeClaim is deleted once that capacity is initialized or, at the
	// latest, at the deadline.
	AnnotationInterruption = "nodewright.dev/interruption"
	// AnnotationInterruptionDeadline is when (RFC 3339) the NodeClaim is
	// deleted whether or not its replacements are up.
	AnnotationInterruptionDeadline = "nodewright.dev/interruption-deadline"
	// AnnotationInterruptionPlanned is when (RFC 3339) planning replacement
	// capacity for the node's pods began. It is written under an
	// optimistic lock before anything is planned, so replacements are
	// planned once per interruption, whatever the duplicates and restarts.
	// It is taken back (and planning starts over on a later poll) when
	// nothing came of the plan: the planner created nothing, or a
	// replacement is gone before it was initialized.
	AnnotationInterruptionPlanned = "nodewright.dev/interruption-planned"
	// AnnotationInterruptionReplacements names the replacement NodeClaims
	// planned (comma-separated; empty when the pods needed none). While it
	// is absent and AnnotationInterruptionPlanned is set, planning is under
	// way or was cut short by a restart; the NodeClaim is then deleted at
	// its deadline.
	AnnotationInterruptionReplacements = "nodewright.dev/interruption-replacements"
)

// Decision reads the interruption decision a NodeClaim carries: its kind
// and deadline, ok false when it carries none. A deadline that is missing
// or not an RFC 3339 time is an error naming the NodeClaim and annotation.
func Decision(nc *karpv1.NodeClaim) (kind Kind, deadline time.Time, ok bool, err error) {
	v, ok := nc.Annotations[AnnotationInterruption]
	if !ok {
		return "", time.Time{}, false, nil
	}
	deadline, err = time.Parse(time.RFC3339, nc.Annotations[AnnotationInterruptionDeadline])
	if err != nil {
		return Kind(v), time.Time{}, true, fmt.Errorf("nodeclaim %s: annotation %s: %w", nc.Name, AnnotationInterruptionDeadline, err)
	}
	return Kind(v), deadline, true, nil
}

// act reports the event on the NodeClaim and, for kinds that end the
// instance, marks a spot offering unavailable and records the decision on
// the NodeClaim. A NodeClaim that already goes for an interruption keeps
// its decision, or takes the new one's earlier deadline.
func (c *Controller) act(ctx context.Context, nc *karpv1.NodeClaim, m Message) error {
	c.recorder.Eventf(nc, corev1.EventTypeWarning, m.Kind.Event(), "NodeClaim %s: %s", nc.Name, describe(m.Kind))
	grace, acts := m.Kind.Grace()
	if !acts || nc.DeletionTimestamp != nil {
		return nil
	}
	if m.Kind == SpotInterrupted && c.unavailable != nil {
		c.unavailable.MarkUnavailable(nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], karpv1.CapacityTypeSpot)
	}
	deadline := m.Time.Add(grace)
	if m.Time.IsZero() {
		deadline = c.clock.Now().Add(grace)
	}
	deadline = deadline.UTC().Truncate(time.Second) // as RFC 3339 keeps it
	recorded := false
	err := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
		recorded = false
		if nc.DeletionTimestamp != nil {
			return false
		}
		if _, at, ok, err := Decision(nc); ok && err == nil && !deadline.Before(at) {
			return false // a duplicate, or a later deadline than the one held
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationInterruption] = string(m.Kind)
		nc.Annotations[AnnotationInterruptionDeadline] = deadline.Format(time.RFC3339)
		recorded = true
		return true
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("recording the %s interruption of nodeclaim %s: %w", m.Kind, nc.Name, err)
	}
	if recorded {
		c.log.Info("interruption recorded", "NodeClaim", nc.Name, "kind", m.Kind, "deadline", deadline)
		c.mu.Lock()
		c.deciding, c.recorded = true, true
		c.mu.Unlock()
	}
	return nil
}

// advanceAll carries every recorded decision one step further.
func (c *Controller) advanceAll(ctx context.Context) error {
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{NodeClaimInterruptedIndex: "true"}); err != nil {
		return fmt.Errorf("listing interrupted nodeclaims: %w", err)
	}
	slices.SortFunc(claims.Items, func(a, b karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	var errs []error
	open := false
	current := map[string]bool{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue // termination drains it
		}
		deleted, err := c.advance(ctx, nc)
		if err != nil {
			errs = append(errs, err)
		}
		open = open || !deleted
		if !deleted {
			current[claimKey(nc)] = true
		}
	}
	c.mu.Lock()
	// A decision recorded by this poll may not be in a cached list yet.
	c.deciding, c.recorded = open || c.recorded, false
	// What is remembered of a NodeClaim no longer under way is of no use.
	maps.DeleteFunc(c.unrecorded, func(k string, _ []string) bool { return !current[k] })
	for _, m := range []map[string]string{c.unplanned, c.warned} {
		maps.DeleteFunc(m, func(k string, _ string) bool { return !current[k] })
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

// claimKey tells NodeClaims apart in the controller's memory, a NodeClaim
// created again under an earlier one's name included.
func claimKey(nc *karpv1.NodeClaim) string {
	return nc.Name + "/" + string(nc.UID)
}

// advance cordons the NodeClaim's node and plans its pods' replacements
// (once), and deletes the NodeClaim when they are initialized or the
// deadline has come.
func (c *Controller) advance(ctx context.Context, nc *karpv1.NodeClaim) (deleted bool, err error) {
	r, err := c.read(ctx, nc)
	if r.deadline.IsZero() {
		return false, err // no safe reading yet: wait
	}
	if r.grace > 0 && c.clock.Now().Before(r.deadline) {
		if nc.Status.NodeName != "" {
			wait, perr := c.prepare(ctx, nc)
			if perr != nil || wait {
				return false, errors.Join(err, perr)
			}
		}
		if r.untilDeadline {
			return false, err
		}
	}
	if derr := c.kube.Delete(ctx, nc); derr != nil {
		if apierrors.IsNotFound(derr) {
			return true, err
		}
		return false, errors.Join(err, fmt.Errorf("deleting interrupted nodeclaim %s: %w", nc.Name, derr))
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "TerminatingOnInterruption", "NodeClaim %s: %s", nc.Name, describe(r.kind))
	c.metrics.NodeClaimDisrupted(nc, string(r.kind))
	c.log.Info("deleting an interrupted NodeClaim", "NodeClaim", nc.Name, "kind", r.kind, "replacements", nc.Annotations[AnnotationInterruptionReplacements])
	return true, err
}
