package disruption

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// ReplacementsAnnotation is set on each candidate NodeClaim of a replace
// decision, before any replacement is created: the comma-separated names of
// ALL the replacement NodeClaims the decision launches. With the
// NodeClaim's DisruptionReason condition it is the decision as persisted in
// the API: a restarted loop finds the replacements by these names (a Create
// whose answer was lost included) and finishes the decision or rolls it
// back.
const ReplacementsAnnotation = "nodewright.dev/disruption-replacements"

// conflictBackoff spaces the attempts of a write that lost an
// optimistic-lock race: 10ms, 50ms, 250ms, 1.25s, then it gives up (the
// next pass tries again). No jitter: one writer per object, and tests stay
// deterministic on a fake clock.
var conflictBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 5, Steps: 5}

// attempt is one read-modify-write of an object under an optimistic lock.
// It reads the object through r; the first attempt (first true) may
// instead start from the object a previous write of the loop returned. It
// reports recheck when it found nothing to write on a copy it read (not
// one the loop wrote): on the first attempt that copy may be stale.
type attempt func(r client.Reader, first bool) (recheck bool, err error)

// writeLatest runs try until it writes, or finds nothing to do on an
// up-to-date copy. The first attempt reads through the loop's client,
// which may be the manager's cache and lag the loop's own last write; so
// after a Conflict (backing off on the loop's clock) and after a cached
// read that found nothing to do, it reads again through the uncached
// reader.
func (l *Loop) writeLatest(try attempt) error {
	backoff := conflictBackoff
	r, first := client.Reader(l.kube), true
	for {
		recheck, err := try(r, first)
		switch {
		case err == nil && recheck && l.uncached && first:
			// confirm on a fresh read
		case apierrors.IsConflict(err) && backoff.Steps > 1:
			if d := backoff.Step(); l.uncached {
				// Only a cache lags: without one (the simulator's store, a
				// fresh read) waiting buys nothing, and sleeping a fake
				// clock would move simulated time inside a pass.
				l.clock.Sleep(d)
			}
		default:
			return err
		}
		r, first = l.reader, false
	}
}

// hasDisruptedTaint reports whether the node carries
// karpenter.sh/disrupted:NoSchedule.
func hasDisruptedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
}

// taintNode adds (on) or removes karpenter.sh/disrupted:NoSchedule on the
// named node. The patch carries the node's resourceVersion, so a change
// another actor made to the taints since the read is not overwritten: on a
// conflict the node is read again and the change made anew. A node that is
// gone needs nothing.
func (l *Loop) taintNode(ctx context.Context, name string, on bool) error {
	if name == "" {
		return nil
	}
	err := l.writeLatest(func(r client.Reader, first bool) (bool, error) {
		node := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if hasDisruptedTaint(node) == on {
			return true, nil
		}
		if !on && node.DeletionTimestamp != nil {
			return true, nil // termination owns the taint of a deleting node
		}
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if on {
			node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		} else {
			node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
		}
		return false, client.IgnoreNotFound(l.kube.Patch(ctx, node, patch))
	})
	if err != nil {
		return fmt.Errorf("tainting node %s disrupted (%v): %w", name, on, err)
	}
	return nil
}

// markClaim persists (reason non-empty) or clears the decision on a
// NodeClaim: its DisruptionReason condition and, for a replace decision,
// ReplacementsAnnotation naming the replacements. Setting writes the
// condition first, then the annotation; clearing removes the annotation
// first, then the condition: a NodeClaim with the annotation always has the
// condition, so a half-written decision reads as one without replacements.
// The second write starts from the object the first returned (its new
// resourceVersion), not from a read that may lag it. It returns the
// NodeClaim as written, nil if it is gone.
func (l *Loop) markClaim(ctx context.Context, name string, reason karpv1.DisruptionReason, replacements []string) (*karpv1.NodeClaim, error) {
	if reason == "" {
		nc, err := l.annotateClaim(ctx, name, "", nil)
		if err != nil || nc == nil {
			return nil, err
		}
		return l.setReason(ctx, name, "", nc)
	}
	nc, err := l.setReason(ctx, name, reason, nil)
	if err != nil || nc == nil || len(replacements) == 0 {
		return nc, err
	}
	return l.annotateClaim(ctx, name, strings.Join(replacements, ","), nc)
}

// readClaim is the NodeClaim an attempt starts from: have (the loop's own
// last write of it) on the first attempt if given, else read through r;
// nil if it is gone.
func readClaim(ctx context.Context, r client.Reader, first bool, name string, have *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if first && have != nil {
		return have, nil
	}
	nc := &karpv1.NodeClaim{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return nc, nil
}

// setReason sets or clears the NodeClaim's DisruptionReason condition
// (an update of the status at the resourceVersion read, retried on a
// conflict), starting from have if given (see readClaim).
func (l *Loop) setReason(ctx context.Context, name string, reason karpv1.DisruptionReason, have *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	var out *karpv1.NodeClaim
	err := l.writeLatest(func(r client.Reader, first bool) (bool, error) {
		nc, err := readClaim(ctx, r, first, name, have)
		if out = nc; nc == nil || err != nil {
			return false, err
		}
		var changed bool
		if reason == "" {
			changed = meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
		} else {
			changed = meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(reason), Message: fmt.Sprintf("disrupted: %s", reason), ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(l.clock.Now())})
		}
		if !changed {
			return !(first && have != nil), nil
		}
		if err := l.kube.Status().Update(ctx, nc); err != nil {
			if apierrors.IsNotFound(err) {
				out = nil
				return false, nil
			}
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("marking nodeclaim %s disrupted (%q): %w", name, reason, err)
	}
	return out, nil
}

// annotateClaim sets ReplacementsAnnotation to value, or removes it when
// value is empty, starting from have if given (see readClaim).
func (l *Loop) annotateClaim(ctx context.Context, name, value string, have *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	var out *karpv1.NodeClaim
	err := l.writeLatest(func(r client.Reader, first bool) (bool, error) {
		nc, err := readClaim(ctx, r, first, name, have)
		if out = nc; nc == nil || err != nil {
			return false, err
		}
		if nc.Annotations[ReplacementsAnnotation] == value {
			return !(first && have != nil), nil
		}
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if value == "" {
			delete(nc.Annotations, ReplacementsAnnotation)
		} else {
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[ReplacementsAnnotation] = value
		}
		if err := l.kube.Patch(ctx, nc, patch); err != nil {
			if apierrors.IsNotFound(err) {
				out = nil
				return false, nil
			}
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("annotating nodeclaim %s with %s=%q: %w", name, ReplacementsAnnotation, value, err)
	}
	return out, nil
}

// ReplacingAnnotation is stamped on each replacement NodeClaim when a
// replace decision creates it: the comma-separated names of the candidate
// NodeClaims it replaces. It is the back-reference that makes the
// replacement the decision's own: a decision (recovered after a restart or
// not) adopts, awaits and, on rollback, deletes only NodeClaims carrying it
// naming its candidates; a NodeClaim named in ReplacementsAnnotation
// without it is never deleted, and the decision is rolled back.
const ReplacingAnnotation = "nodewright.dev/disruption-replacing"

// replaces reports whether nc was created as a replacement for all of
// candidates (its ReplacingAnnotation names each of them).
func replaces(nc *karpv1.NodeClaim, candidates []string) bool {
	v, ok := nc.Annotations[ReplacingAnnotation]
	if !ok || len(candidates) == 0 {
		return false
	}
	stamped := strings.Split(v, ",")
	for _, c := range candidates {
		if !slices.Contains(stamped, c) {
			return false
		}
	}
	return true
}

// parseReplacements reads a ReplacementsAnnotation value: the names that
// are well formed (DNS-1123 subdomains, each once), and an error naming
// what is not.
func parseReplacements(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var names []string
	var errs []error
	for _, n := range strings.Split(v, ",") {
		switch {
		case n == "":
			errs = append(errs, errors.New("an empty name"))
		case len(validation.IsDNS1123Subdomain(n)) > 0:
			errs = append(errs, fmt.Errorf("%q: %s", n, strings.Join(validation.IsDNS1123Subdomain(n), "; ")))
		case slices.Contains(names, n):
			errs = append(errs, fmt.Errorf("%q named twice", n))
		default:
			names = append(names, n)
		}
	}
	if len(errs) > 0 {
		return names, fmt.Errorf("%s=%q: %w", ReplacementsAnnotation, v, errors.Join(errs...))
	}
	return names, nil
}
