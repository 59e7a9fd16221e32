package interruption_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

// failingReplacer creates made and then fails, as the provisioner does
// when creating one of its NodeClaims fails with an API error.
type failingReplacer struct {
	calls int
	made  []*karpv1.NodeClaim
}

func (r *failingReplacer) ProvisionFor(context.Context, string, []*corev1.Pod) ([]*karpv1.NodeClaim, error) {
	r.calls++
	return r.made, errors.New("creating nodeclaim for nodepool default: injected: etcd timed out")
}

// A replacement that could not be created is not "no pods need a place":
// the interrupted NodeClaim stays, its replacements are planned again on
// the next poll, and the deadline still holds. Replacements created before
// the failure are waited for.
func TestReplacementCreateFailsKeepsTheNode(t *testing.T) {
	cases := []struct {
		name string
		// created: one replacement was created before the failure.
		created bool
		// plans: how many times replacements are planned over two polls.
		plans int
	}{
		{"nothing created", false, 2},
		{"one of two created", true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := &failingReplacer{}
			if tc.created {
				r.made = []*karpv1.NodeClaim{e.replacement(t)}
			}
			e.ctrl = interruption.New(e.kube, sqsClient(e), r, e.marks, e.recorder, nil, e.clock, discard, interruption.Options{Queue: "demo", ShortPoll: true}).
				WithAPIReader(e.api)
			if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
				t.Fatal(err)
			}
			if err := e.ctrl.Poll(context.Background(), e.url); err == nil {
				t.Error("Poll reported no error while creating the replacement failed")
			}
			e.clock.Step(10 * time.Second)
			_ = e.ctrl.Poll(context.Background(), e.url)
			if e.claimGone(t) {
				t.Fatalf("NodeClaim deleted 10 s into a 5-minute scheduled change although its replacements were not created (planned %d times)", r.calls)
			}
			if r.calls != tc.plans {
				t.Errorf("replacements planned %d times over two polls, want %d", r.calls, tc.plans)
			}
			if tc.created {
				initialize(t, e.api, "replacement-1")
				e.clock.Step(10 * time.Second)
				_ = e.ctrl.Poll(context.Background(), e.url)
				if !e.claimGone(t) {
					t.Error("the NodeClaim stayed after the replacement created before the failure was up")
				}
				return
			}
			// The deadline holds: 5 minutes after the event it goes.
			for elapsed := 20 * time.Second; elapsed < 5*time.Minute; elapsed += 10 * time.Second {
				e.clock.Step(10 * time.Second)
				_ = e.ctrl.Poll(context.Background(), e.url)
				if e.claimGone(t) {
					t.Fatalf("deleted %v after the event, before the deadline", elapsed)
				}
			}
			e.clock.Step(10 * time.Second)
			_ = e.ctrl.Poll(context.Background(), e.url)
			if !e.claimGone(t) {
				t.Error("the NodeClaim outlived its deadline")
			}
		})
	}
}

// The patch writing the planned mark reaches the API but its answer is
// lost: the controller that saw the error finds its mark on the next poll
// and plans, once.
func TestPlannedMarkAnswerLostStillPlans(t *testing.T) {
	lost := false
	e := newEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		data, _ := patch.Data(obj)
		err := c.Patch(ctx, obj, patch, opts...)
		if err == nil && !lost && strings.Contains(string(data), interruption.AnnotationInterruptionPlanned) {
			lost = true
			return errors.New("injected: the answer was lost")
		}
		return err
	}})
	e.replacement(t)
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	_ = e.ctrl.Poll(context.Background(), e.url)
	for range 6 {
		e.clock.Step(10 * time.Second)
		_ = e.ctrl.Poll(context.Background(), e.url)
	}
	if !lost {
		t.Fatal("fault not injected")
	}
	if len(e.replacer.calls) != 1 {
		t.Errorf("replacements planned %d times after the planned mark's answer was lost, want once", len(e.replacer.calls))
	}
	initialize(t, e.api, "replacement-1")
	e.clock.Step(10 * time.Second)
	e.poll(t)
	if !e.claimGone(t) {
		t.Error("the NodeClaim stayed after its replacement was up")
	}
}

// The only replacement is deleted before it is initialized (refused for
// capacity, say) while the deadline is ahead: it does not count as up;
// the node's pods are planned new places again.
func TestReplacementGoneBeforeInitializedPlansAgain(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.replacement(t)
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	e.poll(t)
	if err := e.api.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	second := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "replacement-2"}}
	if err := e.api.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	e.replacer.made = []*karpv1.NodeClaim{second}
	for range 2 {
		e.clock.Step(10 * time.Second)
		e.poll(t)
		if e.claimGone(t) {
			t.Fatal("the NodeClaim was deleted although its only replacement is gone, 5 minutes before the deadline")
		}
	}
	if len(e.replacer.calls) != 2 {
		t.Fatalf("replacements planned %d times, want twice (again once the first was gone)", len(e.replacer.calls))
	}
	initialize(t, e.api, "replacement-2")
	e.clock.Step(10 * time.Second)
	e.poll(t)
	if !e.claimGone(t) {
		t.Error("the NodeClaim stayed after its second replacement was up")
	}
}

// A replacement just created that the controller's cache does not hold yet
// is not gone: the API says it exists, so it is waited for, not planned
// again.
func TestReplacementNotCachedYetIsWaitedFor(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if key.Name == "replacement-1" {
			return apierrors.NewNotFound(schema.GroupResource{Group: karpv1.Group, Resource: "nodeclaims"}, key.Name) // a cache that lags
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	e.replacement(t)
	if err := e.fake.Send("demo", "scheduled-change", e.instance); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.poll(t)
		e.clock.Step(10 * time.Second)
	}
	if len(e.replacer.calls) != 1 || e.claimGone(t) {
		t.Errorf("replacements planned %d times, NodeClaim deleted %v; want one plan, the NodeClaim waiting for it", len(e.replacer.calls), e.claimGone(t))
	}
}
