package interruption_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

func (e *env) poll(t *testing.T) {
	t.Helper()
	if err := e.ctrl.Poll(context.Background(), e.url); err != nil {
		t.Fatal(err)
	}
}

func (e *env) cordoned(t *testing.T) bool {
	t.Helper()
	node := &corev1.Node{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Name: "node-1"}, node); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
}

func initialize(t *testing.T, kube client.Client, name string) {
	t.Helper()
	r := &karpv1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, r); err != nil {
		t.Fatal(err)
	}
	r.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	if err := kube.Update(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// A scheduled change cordons the node and plans its pods new places, and
// the controller is restarted before the wait is over: the new controller,
// knowing only what the API holds, deletes the NodeClaim when the
// replacement is up or, at the latest, when the 5 minutes are over.
func TestScheduledChangeSurvivesARestart(t *testing.T) {
	cases := []struct {
		name string
		// initialized: the replacement comes up before the deadline.
		initialized bool
		// gone is when the NodeClaim must be deleted, after the event.
		gone time.Duration
	}{
		{"at the deadline without replacement", false, 5 * time.Minute},
		{"once the replacement is up", true, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.replacement(t)
			if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
				t.Fatal(err)
			}
			e.poll(t)
			if !e.cordoned(t) || len(e.replacer.calls) != 1 || e.claimGone(t) {
				t.Fatalf("after the message: cordoned %v, replacement plans %d, deleted %v; want cordoned, one plan, not deleted",
					e.cordoned(t), len(e.replacer.calls), e.claimGone(t))
			}
			e.clock.Step(time.Minute)
			e.restart()
			if tc.initialized {
				initialize(t, e.api, "replacement-1")
			}
			// Polled every 10 s, as the live controller at least is.
			for elapsed := time.Minute; elapsed < tc.gone; elapsed += 10 * time.Second {
				e.poll(t)
				if e.claimGone(t) {
					t.Fatalf("deleted %v after the event, want %v", elapsed, tc.gone)
				}
				e.clock.Step(10 * time.Second)
			}
			e.poll(t)
			if !e.claimGone(t) {
				t.Fatalf("the NodeClaim is still there %v after the event: its node stays cordoned and is never replaced", tc.gone)
			}
			if len(e.replacer.calls) != 1 {
				t.Errorf("replacements planned %d times, want once", len(e.replacer.calls))
			}
		})
	}
}

// When the decision cannot be written to the API, the message stays on
// the queue (SQS hands it out again after its visibility timeout) and is
// acted on once the API answers again.
func TestMessageKeptWhenTheDecisionIsNotWritten(t *testing.T) {
	down := true
	e := newEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*karpv1.NodeClaim); ok && down {
			return errors.New("injected: the API server is unavailable")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(context.Background(), e.url); err == nil {
		t.Error("Poll reported no error while the decision could not be written")
	}
	if e.fake.QueueDepth("demo") != 1 {
		t.Fatalf("queue depth %d: the message was deleted though its decision was never recorded", e.fake.QueueDepth("demo"))
	}
	down = false
	e.clock.Step(31 * time.Second) // the visibility timeout
	e.restart()
	e.poll(t)
	if e.fake.QueueDepth("demo") != 0 || !e.cordoned(t) {
		t.Errorf("once the API answers: queue depth %d, cordoned %v; want the message handled and deleted", e.fake.QueueDepth("demo"), e.cordoned(t))
	}
}

// SQS delivers at least once: the same event, in one batch, again to the
// same controller, and again after a restart, plans the node's
// replacements once.
func TestDuplicateMessagesPlanOnce(t *testing.T) {
	e := newEnv(t)
	e.replacement(t)
	for range 2 {
		if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
			t.Fatal(err)
		}
	}
	e.poll(t)
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(10 * time.Second)
	e.poll(t)
	e.restart()
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(10 * time.Second)
	e.poll(t)
	if len(e.replacer.calls) != 1 {
		t.Errorf("replacements planned %d times for one interruption, want once", len(e.replacer.calls))
	}
	if e.fake.QueueDepth("demo") != 0 {
		t.Errorf("queue depth %d: duplicates not deleted", e.fake.QueueDepth("demo"))
	}
	if e.claimGone(t) {
		t.Error("a duplicate message deleted the NodeClaim before its replacement or deadline")
	}
}

// Cordoning an interrupted node keeps a taint another actor adds between
// the controller's read of the node and its write.
func TestInterruptionCordonKeepsAConcurrentTaint(t *testing.T) {
	other := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}
	raced := false
	e := newEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*corev1.Node); ok && !raced {
			raced = true
			current := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
				return err
			}
			current.Spec.Taints = append(current.Spec.Taints, other)
			if err := c.Update(ctx, current); err != nil {
				return err
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	if err := e.fake.Send("demo", "spot-interruption", e.instance); err != nil {
		t.Fatal(err)
	}
	e.poll(t)
	node := &corev1.Node{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Name: "node-1"}, node); err != nil {
		t.Fatal(err)
	}
	for _, want := range []corev1.Taint{karpv1.DisruptedNoScheduleTaint, other} {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&want) }) {
			t.Errorf("node taints %v: %s is missing", node.Spec.Taints, want.Key)
		}
	}
}

// Replacements are planned, but writing their names fails. The same
// controller writes them on its next poll; a restarted one, which cannot
// know them, does not plan a second time and deletes the NodeClaim at the
// deadline.
func TestReplacementsNotRecordedArePlannedOnce(t *testing.T) {
	cases := []struct {
		name    string
		restart bool
		// gone is when the NodeClaim must be deleted, after the event; the
		// replacement is initialized a minute after it.
		gone time.Duration
	}{
		{"same controller", false, time.Minute},
		{"after a restart", true, 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			failed := false
			e := newEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if data, err := patch.Data(obj); err == nil && !failed && strings.Contains(string(data), interruption.AnnotationInterruptionReplacements) {
					failed = true
					return errors.New("injected: the API server is unavailable")
				}
				return c.Patch(ctx, obj, patch, opts...)
			}})
			e.replacement(t)
			if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
				t.Fatal(err)
			}
			if err := e.ctrl.Poll(context.Background(), e.url); err == nil || !failed {
				t.Fatalf("Poll: %v, want the injected error", err)
			}
			if tc.restart {
				e.restart()
			}
			for elapsed := time.Duration(0); elapsed <= tc.gone; elapsed += 10 * time.Second {
				if elapsed == time.Minute {
					initialize(t, e.api, "replacement-1")
				}
				if elapsed > 0 {
					e.poll(t)
				}
				if gone := e.claimGone(t); gone != (elapsed == tc.gone) {
					t.Fatalf("%v after the event: deleted %v; want it deleted %v after", elapsed, gone, tc.gone)
				}
				e.clock.Step(10 * time.Second)
			}
			if len(e.replacer.calls) != 1 {
				t.Errorf("replacements planned %d times, want once", len(e.replacer.calls))
			}
		})
	}
}
