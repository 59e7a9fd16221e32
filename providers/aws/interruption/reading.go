package interruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
)

// longestGrace is the longest wait any kind allows (a scheduled change's):
// how long a decision the controller cannot fully read waits.
const longestGrace = 5 * time.Minute

// reading is how the controller carries out a NodeClaim's decision.
type reading struct {
	kind Kind
	// deadline is when the NodeClaim goes at the latest; zero when there
	// is no safe reading yet (it then waits).
	deadline time.Time
	// grace > 0: the node is cordoned and its pods are planned new places
	// before the deadline.
	grace time.Duration
	// untilDeadline: the NodeClaim waits for its deadline whatever its
	// replacements do (a kind the controller does not know).
	untilDeadline bool
}

// read reads the decision a NodeClaim carries, safely when it is
// malformed: a kind the controller does not act on waits for the deadline
// with the longest grace's preparations, and a deadline that cannot be
// read is replaced, on the NodeClaim, by now + the longest grace. Either
// is reported (a Warning event and an error naming the NodeClaim and the
// annotation) instead of deleting the NodeClaim at once.
func (c *Controller) read(ctx context.Context, nc *karpv1.NodeClaim) (reading, error) {
	kind, deadline, _, derr := Decision(nc)
	r := reading{kind: kind, deadline: deadline}
	var errs []error
	var acts bool
	if r.grace, acts = kind.Grace(); !acts {
		r.grace, r.untilDeadline = longestGrace, true
		errs = append(errs, c.warnUnknownKind(nc, kind))
	}
	if derr != nil {
		at, err := c.repairDeadline(ctx, nc)
		if err != nil {
			return reading{kind: kind}, errors.Join(append(errs, fmt.Errorf("%w; writing a deadline of now + %v instead: %w", derr, longestGrace, err))...)
		}
		r.deadline = at
		err = fmt.Errorf("%w; it goes at %s at the latest", derr, at.Format(time.RFC3339))
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "InterruptionDeadlineUnreadable", "NodeClaim %s: %v", nc.Name, err)
		errs = append(errs, err)
	}
	return r, errors.Join(errs...)
}

// warnUnknownKind reports, once per controller life and NodeClaim, a kind
// the controller does not act on.
func (c *Controller) warnUnknownKind(nc *karpv1.NodeClaim, kind Kind) error {
	key := claimKey(nc)
	c.mu.Lock()
	seen := c.warned[key] == string(kind)
	c.warned[key] = string(kind)
	c.mu.Unlock()
	if seen {
		return nil
	}
	err := fmt.Errorf("nodeclaim %s: annotation %s: %q is not an interruption kind Nodewright acts on; the node is cordoned and replaced, and the NodeClaim deleted at its deadline",
		nc.Name, AnnotationInterruption, string(kind))
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "InterruptionKindUnknown", "NodeClaim %s: %v", nc.Name, err)
	return err
}

// repairDeadline writes now + the longest grace as the deadline of a
// NodeClaim whose deadline cannot be read, so that every later poll, and a
// restarted controller, keeps the same deadline. A deadline another actor
// wrote meanwhile is kept.
func (c *Controller) repairDeadline(ctx context.Context, nc *karpv1.NodeClaim) (time.Time, error) {
	at := c.clock.Now().Add(longestGrace).UTC().Truncate(time.Second)
	err := termination.PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
		if _, _, ok, err := Decision(nc); !ok || err == nil {
			return false
		}
		nc.Annotations[AnnotationInterruptionDeadline] = at.Format(time.RFC3339)
		return true
	})
	if err != nil {
		return time.Time{}, err
	}
	_, written, ok, err := Decision(nc)
	if !ok {
		return time.Time{}, fmt.Errorf("nodeclaim %s: annotation %s was removed", nc.Name, AnnotationInterruption)
	}
	return written, err
}
