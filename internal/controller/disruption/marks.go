package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// conflictRetries bounds the re-read-and-retry rounds of a write that lost
// an optimistic-lock race.
const conflictRetries = 5

// onConflict runs write until it does not fail with a Conflict (write
// re-reads the object each time), at most conflictRetries times.
func onConflict(write func() error) error {
	var err error
	for range conflictRetries {
		if err = write(); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
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
	err := onConflict(func() error {
		node := &corev1.Node{}
		if err := l.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return client.IgnoreNotFound(err)
		}
		if hasDisruptedTaint(node) == on {
			return nil
		}
		if !on && node.DeletionTimestamp != nil {
			return nil // termination owns the taint of a deleting node
		}
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if on {
			node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		} else {
			node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
		}
		return client.IgnoreNotFound(l.kube.Patch(ctx, node, patch))
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
// It returns the NodeClaim as written, nil if it is gone.
func (l *Loop) markClaim(ctx context.Context, name string, reason karpv1.DisruptionReason, replacements []string) (*karpv1.NodeClaim, error) {
	if reason == "" {
		if _, err := l.annotateClaim(ctx, name, ""); err != nil {
			return nil, err
		}
		return l.setReason(ctx, name, "")
	}
	nc, err := l.setReason(ctx, name, reason)
	if err != nil || nc == nil || len(replacements) == 0 {
		return nc, err
	}
	return l.annotateClaim(ctx, name, strings.Join(replacements, ","))
}

// setReason sets or clears the NodeClaim's DisruptionReason condition
// (an update of the status at the resourceVersion read, retried on a
// conflict).
func (l *Loop) setReason(ctx context.Context, name string, reason karpv1.DisruptionReason) (*karpv1.NodeClaim, error) {
	var out *karpv1.NodeClaim
	err := onConflict(func() error {
		nc := &karpv1.NodeClaim{}
		if err := l.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			out = nil
			return client.IgnoreNotFound(err)
		}
		out = nc
		var changed bool
		if reason == "" {
			changed = meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
		} else {
			changed = meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(reason), Message: fmt.Sprintf("disrupted: %s", reason), ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(l.clock.Now())})
		}
		if !changed {
			return nil
		}
		if err := l.kube.Status().Update(ctx, nc); err != nil {
			if apierrors.IsNotFound(err) {
				out = nil
				return nil
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("marking nodeclaim %s disrupted (%q): %w", name, reason, err)
	}
	return out, nil
}

// annotateClaim sets ReplacementsAnnotation to value, or removes it when
// value is empty.
func (l *Loop) annotateClaim(ctx context.Context, name, value string) (*karpv1.NodeClaim, error) {
	var out *karpv1.NodeClaim
	err := onConflict(func() error {
		nc := &karpv1.NodeClaim{}
		if err := l.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			out = nil
			return client.IgnoreNotFound(err)
		}
		out = nc
		if nc.Annotations[ReplacementsAnnotation] == value {
			return nil
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
				return nil
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("annotating nodeclaim %s with %s=%q: %w", name, ReplacementsAnnotation, value, err)
	}
	return out, nil
}

// replacementsOf reads the names in a NodeClaim's ReplacementsAnnotation.
func replacementsOf(nc *karpv1.NodeClaim) []string {
	v := nc.Annotations[ReplacementsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
