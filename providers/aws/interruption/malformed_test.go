package interruption_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

// A decision whose kind is not one the controller knows, or whose deadline
// cannot be read, is reported (an error and a Warning event naming the
// NodeClaim and the annotation) and read safely instead of deleting the
// NodeClaim at once: an unknown kind waits for its deadline; an unreadable
// deadline becomes now + the longest grace, kept on the NodeClaim so a
// restart keeps it.
func TestMalformedDecisionIsReadSafely(t *testing.T) {
	cases := []struct {
		name     string
		kind     string
		deadline string
		// annotation the error and the event name.
		annotation string
		// gone is when the NodeClaim must be deleted, after the first poll.
		gone time.Duration
	}{
		{"unknown kind", "capacity_block_ending", "2026-11-30T11:00:00Z", interruption.AnnotationInterruption, time.Hour},
		{"deadline not a time", "scheduled_change", "soon", interruption.AnnotationInterruptionDeadline, 5 * time.Minute},
		{"deadline missing", "spot_interrupted", "", interruption.AnnotationInterruptionDeadline, 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)   // the clock reads 2026-11-30T10:00:00Z
			e.replacement(t) // never initialized
			nc := &karpv1.NodeClaim{}
			if err := e.api.Get(ctx, client.ObjectKey{Name: "spot-1"}, nc); err != nil {
				t.Fatal(err)
			}
			nc.Annotations = map[string]string{interruption.AnnotationInterruption: tc.kind}
			if tc.deadline != "" {
				nc.Annotations[interruption.AnnotationInterruptionDeadline] = tc.deadline
			}
			if err := e.api.Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
			err := e.ctrl.Poll(ctx, e.url)
			if err == nil || !strings.Contains(err.Error(), "spot-1") || !strings.Contains(err.Error(), tc.annotation+":") {
				t.Errorf("Poll error %v, want one naming nodeclaim spot-1 and annotation %s", err, tc.annotation)
			}
			if !warned(e, "spot-1", tc.annotation) {
				t.Errorf("no Warning event naming nodeclaim spot-1 and annotation %s", tc.annotation)
			}
			e.restart() // the reading survives a restart
			for elapsed := time.Duration(0); elapsed < tc.gone; elapsed += time.Minute {
				if e.claimGone(t) {
					t.Fatalf("deleted %v after the first poll, want %v", elapsed, tc.gone)
				}
				e.clock.Step(time.Minute)
				_ = e.ctrl.Poll(ctx, e.url)
			}
			if !e.claimGone(t) {
				t.Errorf("the NodeClaim is still there %v after the first poll", tc.gone)
			}
		})
	}
}

// warned: the controller's recorder holds a Warning event naming both.
func warned(e *env, claim, annotation string) bool {
	for {
		select {
		case ev := <-e.recorder.Events:
			if strings.HasPrefix(ev, "Warning") && strings.Contains(ev, claim) && strings.Contains(ev, annotation+":") {
				return true
			}
		default:
			return false
		}
	}
}
