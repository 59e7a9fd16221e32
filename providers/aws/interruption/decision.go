package interruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/internal/disruption"
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
	// planned at most once per interruption, whatever the duplicates and
	// restarts.
	AnnotationInterruptionPlanned = "nodewright.dev/interruption-planned"
	// AnnotationInterruptionReplacements names the replacement NodeClaims
	// planned (comma-separated; empty when the pods needed none). While it
	// is absent and AnnotationInterruptionPlanned is set, planning was cut
	// short and the NodeClaim is deleted at its deadline.
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
	err := termination.PatchLocked(ctx, c.kube, nc, func(nc *karpv1.NodeClaim) bool {
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
	}
	c.mu.Lock()
	// A decision recorded by this poll may not be in a cached list yet.
	c.deciding, c.recorded = open || c.recorded, false
	c.mu.Unlock()
	return errors.Join(errs...)
}

// advance cordons the NodeClaim's node and plans its pods' replacements
// (once), and deletes the NodeClaim when they are initialized or the
// deadline has come.
func (c *Controller) advance(ctx context.Context, nc *karpv1.NodeClaim) (deleted bool, err error) {
	kind, deadline, _, err := Decision(nc)
	if err != nil {
		// The instance is going: deleting the NodeClaim now is the safe
		// reading of a deadline that cannot be read.
		c.log.Error(err, "the interruption deadline cannot be read; deleting the NodeClaim now", "NodeClaim", nc.Name)
	}
	if grace, _ := kind.Grace(); grace > 0 && nc.Status.NodeName != "" && c.clock.Now().Before(deadline) {
		wait, err := c.prepare(ctx, nc)
		if err != nil || wait {
			return false, err
		}
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("deleting interrupted nodeclaim %s: %w", nc.Name, err)
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "TerminatingOnInterruption", "NodeClaim %s: %s", nc.Name, describe(kind))
	c.metrics.NodeClaimDisrupted(nc, string(kind))
	c.log.Info("deleting an interrupted NodeClaim", "NodeClaim", nc.Name, "kind", kind, "replacements", nc.Annotations[AnnotationInterruptionReplacements])
	c.mu.Lock()
	delete(c.unrecorded, nc.Name)
	c.mu.Unlock()
	return true, nil
}

// prepare cordons the node and plans replacements for its pods if that
// was not done yet; wait says whether the NodeClaim must still wait for
// them. A node that is gone leaves nothing to wait for.
func (c *Controller) prepare(ctx context.Context, nc *karpv1.NodeClaim) (wait bool, err error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return true, fmt.Errorf("reading node %s of interrupted nodeclaim %s: %w", nc.Status.NodeName, nc.Name, err)
	}
	if err := termination.PatchLocked(ctx, c.kube, node, func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) }) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		return true
	}); err != nil {
		return true, fmt.Errorf("cordoning node %s of interrupted nodeclaim %s: %w", node.Name, nc.Name, err)
	}
	if err := c.plan(ctx, nc, node); err != nil {
		return true, err
	}
	v, known := nc.Annotations[AnnotationInterruptionReplacements]
	if !known {
		return true, nil // being planned, asked to be planned again, or cut short: the deadline decides
	}
	return !c.replacementsUp(ctx, strings.FieldsFunc(v, func(r rune) bool { return r == ',' })), nil
}

// plan plans replacement capacity for the node's pods, unless that was
// begun before (by this controller or an earlier life of it), and records
// the replacements on the NodeClaim.
func (c *Controller) plan(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	if _, began := nc.Annotations[AnnotationInterruptionPlanned]; began {
		c.mu.Lock()
		names, ok := c.unrecorded[nc.Name]
		c.mu.Unlock()
		if _, recorded := nc.Annotations[AnnotationInterruptionReplacements]; ok && !recorded {
			return c.recordReplacements(ctx, nc, names)
		}
		return nil
	}
	began := false
	if err := termination.PatchLocked(ctx, c.kube, nc, func(nc *karpv1.NodeClaim) bool {
		began = false
		if _, ok := nc.Annotations[AnnotationInterruptionPlanned]; ok || nc.DeletionTimestamp != nil {
			return false
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationInterruptionPlanned] = c.clock.Now().UTC().Format(time.RFC3339)
		began = true
		return true
	}); err != nil {
		return fmt.Errorf("marking the replacements of interrupted nodeclaim %s planned: %w", nc.Name, err)
	}
	if !began {
		return nil
	}
	names, planned, err := c.replace(ctx, nc, node)
	if err != nil || !planned {
		// Nothing was planned: take the mark back so the next poll plans.
		undo := termination.PatchLocked(ctx, c.kube, nc, func(nc *karpv1.NodeClaim) bool {
			_, ok := nc.Annotations[AnnotationInterruptionPlanned]
			delete(nc.Annotations, AnnotationInterruptionPlanned)
			return ok
		})
		if undo != nil {
			undo = fmt.Errorf("unmarking the replacements of interrupted nodeclaim %s: %w", nc.Name, undo)
		}
		return errors.Join(err, undo)
	}
	return c.recordReplacements(ctx, nc, names)
}

// recordReplacements writes the planned replacements on the NodeClaim;
// until that succeeds they are kept in memory and written again on the
// next poll (a restart meanwhile leaves the deadline to decide).
func (c *Controller) recordReplacements(ctx context.Context, nc *karpv1.NodeClaim, names []string) error {
	err := termination.PatchLocked(ctx, c.kube, nc, func(nc *karpv1.NodeClaim) bool {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationInterruptionReplacements] = strings.Join(names, ",")
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.unrecorded[nc.Name] = names
		return fmt.Errorf("recording the replacements %v of interrupted nodeclaim %s: %w", names, nc.Name, err)
	}
	delete(c.unrecorded, nc.Name)
	return nil
}

// replace plans its pods new places now; planned is false when the
// planner asked to be asked again.
func (c *Controller) replace(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (replacements []string, planned bool, err error) {
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{termination.PodNodeNameIndex: node.Name}); err != nil {
		return nil, false, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	// The pods a drain moves: running ones, not DaemonSet or static pods.
	var live []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	moving := disruption.Reschedulable(live)
	if len(moving) == 0 || c.replacer == nil {
		return nil, true, nil
	}
	created, err := c.replacer.ProvisionFor(ctx, node.Name, moving)
	switch {
	case errors.Is(err, ErrTryAgain):
		return nil, false, nil
	case err != nil:
		c.log.Error(err, "planning replacement capacity for an interrupted node; its pods will be placed once evicted", "node", node.Name)
	}
	var names []string
	for _, r := range created {
		names = append(names, r.Name)
	}
	c.log.Info("interrupted node cordoned, replacement capacity launching", "node", node.Name, "NodeClaim", nc.Name, "pods", len(moving), "replacements", names)
	return names, true, nil
}

// replacementsUp: every replacement is initialized (or gone: it failed,
// and waiting for it helps nobody).
func (c *Controller) replacementsUp(ctx context.Context, names []string) bool {
	for _, name := range names {
		nc := &karpv1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false // not known to be up: ask again on the next poll
		}
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			return false
		}
	}
	return true
}
