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
	if err := termination.PatchLockedReading(ctx, c.kube, c.reader, node, func(n *corev1.Node) bool {
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
	up, gone := c.replacementsUp(ctx, strings.FieldsFunc(v, func(r rune) bool { return r == ',' }))
	if gone != "" {
		return true, c.planAgain(ctx, nc, v, gone)
	}
	return !up, nil
}

// plan plans replacement capacity for the node's pods, unless that was
// begun before (by this controller or an earlier life of it), and records
// the replacements on the NodeClaim. The planned mark is written first,
// under an optimistic lock, so a restart or a duplicate never plans
// twice; this controller remembers the marks it wrote (or may have
// written: a lost answer) until it has planned, so it plans behind its own
// mark whatever the API answered.
func (c *Controller) plan(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	key := claimKey(nc)
	c.mu.Lock()
	mark, mine := c.unplanned[key]
	names, unrecorded := c.unrecorded[key]
	c.mu.Unlock()
	v, began := nc.Annotations[AnnotationInterruptionPlanned]
	switch {
	case began && mine && v == mark:
		// this controller's own mark, with nothing planned behind it yet
	case began:
		if _, recorded := nc.Annotations[AnnotationInterruptionReplacements]; unrecorded && !recorded {
			return c.recordReplacements(ctx, nc, names)
		}
		return nil
	default:
		if !mine {
			mark = c.clock.Now().UTC().Format(time.RFC3339)
			c.mu.Lock()
			c.unplanned[key] = mark // before the write: its answer may be lost
			c.mu.Unlock()
		}
		ours := false
		if err := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
			v, ok := nc.Annotations[AnnotationInterruptionPlanned]
			ours = ok && v == mark || !ok && nc.DeletionTimestamp == nil
			if ok || !ours {
				return false
			}
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[AnnotationInterruptionPlanned] = mark
			return true
		}); err != nil {
			return fmt.Errorf("marking the replacements of interrupted nodeclaim %s planned: %w", nc.Name, err)
		}
		if !ours {
			c.forgetUnplanned(key)
			return nil
		}
	}
	names, planned, err := c.replace(ctx, nc, node)
	if !planned {
		// Nothing was planned: take the mark back so the next poll, or a
		// restarted controller, plans. Should that fail, the mark stays
		// this controller's to plan behind.
		undo := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
			if nc.Annotations[AnnotationInterruptionPlanned] != mark {
				return false
			}
			delete(nc.Annotations, AnnotationInterruptionPlanned)
			return true
		})
		if undo != nil {
			return errors.Join(err, fmt.Errorf("unmarking the replacements of interrupted nodeclaim %s: %w", nc.Name, undo))
		}
		c.forgetUnplanned(key)
		return err
	}
	c.forgetUnplanned(key)
	return errors.Join(err, c.recordReplacements(ctx, nc, names))
}

func (c *Controller) forgetUnplanned(key string) {
	c.mu.Lock()
	delete(c.unplanned, key)
	c.mu.Unlock()
}

// recordReplacements writes the planned replacements on the NodeClaim;
// until that succeeds they are kept in memory and written again on the
// next poll (a restart meanwhile leaves the deadline to decide).
func (c *Controller) recordReplacements(ctx context.Context, nc *karpv1.NodeClaim, names []string) error {
	err := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationInterruptionReplacements] = strings.Join(names, ",")
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.unrecorded[claimKey(nc)] = names
		return fmt.Errorf("recording the replacements %v of interrupted nodeclaim %s: %w", names, nc.Name, err)
	}
	delete(c.unrecorded, claimKey(nc))
	return nil
}

// replace plans its pods new places now; planned is false when nothing was
// planned: the planner asked to be asked again, or it failed before
// creating anything. Replacements created before a failure are planned
// (and waited for), the failure reported.
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
	if errors.Is(err, ErrTryAgain) {
		return nil, false, nil
	}
	var names []string
	for _, r := range created {
		names = append(names, r.Name)
	}
	if err != nil {
		err = fmt.Errorf("planning replacement capacity for node %s of interrupted nodeclaim %s (created %v): %w", node.Name, nc.Name, names, err)
		if len(created) == 0 {
			return nil, false, err // planned again on the next poll; the deadline holds
		}
	}
	c.log.Info("interrupted node cordoned, replacement capacity launching", "node", node.Name, "NodeClaim", nc.Name, "pods", len(moving), "replacements", names)
	return names, true, err
}

// replacementsUp: every replacement is initialized. gone names one that
// no longer exists, or is being deleted, without having been initialized:
// it will never come up. One the cache does not hold is looked for in the
// API (the reader) before it counts as gone: a cache lags behind the
// replacements just created. A replacement that cannot be read now is not
// up.
func (c *Controller) replacementsUp(ctx context.Context, names []string) (up bool, gone string) {
	up = true
	for _, name := range names {
		r := &karpv1.NodeClaim{}
		err := c.kube.Get(ctx, client.ObjectKey{Name: name}, r)
		if apierrors.IsNotFound(err) {
			err = c.reader.Get(ctx, client.ObjectKey{Name: name}, r)
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, name
			}
			up = false // ask again on the next poll
			continue
		}
		initialized := meta.IsStatusConditionTrue(r.Status.Conditions, karpv1.ConditionTypeInitialized)
		if r.DeletionTimestamp != nil && !initialized {
			return false, name
		}
		up = up && initialized
	}
	return up, ""
}

// planAgain takes back the planned mark and the replacements of a
// NodeClaim one of whose replacements is gone before it came up, so that
// the next poll plans its pods new places again (the deadline holds). It
// changes nothing if the replacements were changed meanwhile.
func (c *Controller) planAgain(ctx context.Context, nc *karpv1.NodeClaim, replacements, gone string) error {
	if err := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
		if v, ok := nc.Annotations[AnnotationInterruptionReplacements]; !ok || v != replacements {
			return false
		}
		delete(nc.Annotations, AnnotationInterruptionReplacements)
		delete(nc.Annotations, AnnotationInterruptionPlanned)
		return true
	}); err != nil {
		return fmt.Errorf("planning again the replacements of interrupted nodeclaim %s (replacement %s is gone): %w", nc.Name, gone, err)
	}
	c.log.Info("a replacement of an interrupted NodeClaim is gone before it came up; planning again", "NodeClaim", nc.Name, "replacement", gone)
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "InterruptionReplacementGone", "NodeClaim %s: replacement %s is gone before it came up; planning again", nc.Name, gone)
	return nil
}
