package simulator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/examples"
	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

// markDisrupting sets a NodeClaim's DisruptionReason condition, as the
// disruption loop does for a decision's candidates.
func markDisrupting(e *Engine, nc *karpv1.NodeClaim, r karpv1.DisruptionReason) error {
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
		Reason: string(r), LastTransitionTime: metav1.NewTime(e.Now())})
	return e.store.Status().Update(context.Background(), nc)
}

// Pods stay pending because every one of Nodewright's writes fails (so
// its NodePool never turns Ready): the pods-bound check does not take
// Nodewright's own "no Ready pool can take them" as an excuse, since the
// pool's NodeClass exists and the pool would take them.
func TestInvariantPodsBoundNotExcusedByOwnStatus(t *testing.T) {
	set := &manifest.Set{}
	if err := set.Add("test.yaml", []byte(invariantPool("")+invariantDeployment("web", 2, ""))); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{InstanceTypes: defaultCatalog(t), Duration: 20 * time.Minute, Seed: 1, Faults: &Faults{API: &APIFaults{ErrorRate: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(context.Background(), &Input{Initial: set}); err != nil {
		t.Fatal(err)
	}
	rep := run(t, e)
	v := expectViolation(t, rep, InvariantPodsBound, PendingBound, PendingBound+pendingEvery, "nodepool/default")
	if !strings.Contains(v.Message, "not Ready") {
		t.Errorf("message %q: want the pool named not Ready", v.Message)
	}
}

// A candidate deleted before its replacement is initialized is reported
// when the decision is read from the replacement's ReplacingAnnotation
// (the candidate names none), and when the candidate's instance is
// terminated rather than its NodeClaim deleted.
func TestInvariantReplaceFirstOtherPaths(t *testing.T) {
	t.Run("replacement names the candidate", func(t *testing.T) {
		e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 10*time.Minute)
		e.At(5*time.Minute, func() error {
			ctx := context.Background()
			nc := listClaims(t, e)[0]
			r := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "replacement-1", Labels: map[string]string{karpv1.LabelNodePool: "default"},
				Annotations: map[string]string{cdisruption.ReplacingAnnotation: nc.Name}}, Spec: *nc.Spec.DeepCopy()}
			e.actor = actorDisruption
			if err := e.store.Create(ctx, r); err != nil {
				return err
			}
			if err := markDisrupting(e, &nc, karpv1.DisruptionReasonUnderutilized); err != nil {
				return err
			}
			return e.store.Delete(ctx, &nc)
		})
		v := expectViolation(t, run(t, e), InvariantReplaceFirst, 5*time.Minute, 5*time.Minute, "nodeclaim/replacement-1")
		if !strings.Contains(v.Message, "replacement-1 is not initialized") {
			t.Errorf("message %q: want the uninitialized replacement", v.Message)
		}
	})
	t.Run("instance terminated", func(t *testing.T) {
		in, err := LoadFS(examples.FS, "seed/scenario.yaml")
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Options{Seed: 1, CloudProvider: "aws", InstanceTypes: defaultCatalog(t), Duration: 15 * time.Minute, BootDelay: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Load(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		var claim string
		e.At(10*time.Minute+5*time.Second, func() error {
			nc := listClaims(t, e)[0]
			claim = nc.Name
			e.actor = actorDisruption
			nc.Annotations = map[string]string{cdisruption.ReplacementsAnnotation: "r-1"}
			if err := e.store.Update(context.Background(), &nc); err != nil {
				return err
			}
			if err := markDisrupting(e, &nc, karpv1.DisruptionReasonUnderutilized); err != nil {
				return err
			}
			return e.aws.SetInstanceState(nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:], "terminated")
		})
		rep := run(t, e)
		v := expectViolation(t, rep, InvariantReplaceFirst, 10*time.Minute, 10*time.Minute+5*time.Second+checkEvery, "nodeclaim/"+claim)
		if !strings.Contains(v.Message, "terminated instance") || !strings.Contains(v.Message, "r-1 does not exist") {
			t.Errorf("message %q: want the missing replacement", v.Message)
		}
	})
}

// The budget check counts every disrupting node of the pool whatever its
// reason (here one Drifted, one Underutilized, under a budget of one), and
// runs when the disruption loop deletes NodeClaims with no reason
// recorded.
func TestInvariantBudgetsEveryReason(t *testing.T) {
	pool := invariantPool("  disruption:\n    budgets: [{nodes: \"1\"}]\n")
	t.Run("two reasons", func(t *testing.T) {
		e := invariantEngine(t, pool+invariantDeployment("web", 6, ""), 10*time.Minute)
		e.At(5*time.Minute, func() error {
			e.actor = actorDisruption
			cs := listClaims(t, e)
			if err := markDisrupting(e, &cs[0], karpv1.DisruptionReasonDrifted); err != nil {
				return err
			}
			return markDisrupting(e, &cs[1], karpv1.DisruptionReasonUnderutilized)
		})
		v := expectViolation(t, run(t, e), InvariantBudgets, 5*time.Minute, 5*time.Minute, "nodepool/default")
		if !strings.Contains(v.Message, "2 nodeclaims of nodepool default disrupting at once") || !strings.Contains(v.Message, "for Underutilized") {
			t.Errorf("message %q: want both nodes counted against the Underutilized budget", v.Message)
		}
	})
	t.Run("deleted without a reason", func(t *testing.T) {
		e := invariantEngine(t, pool+invariantDeployment("web", 6, ""), 10*time.Minute)
		e.At(5*time.Minute, func() error {
			e.actor = actorDisruption
			for _, nc := range listClaims(t, e)[:3] {
				if err := e.store.Delete(context.Background(), &nc); err != nil {
					return err
				}
			}
			return nil
		})
		expectViolation(t, run(t, e), InvariantBudgets, 5*time.Minute, 5*time.Minute, "nodepool/default")
	})
	t.Run("expiry is not checked", func(t *testing.T) {
		e := invariantEngine(t, pool+invariantDeployment("web", 6, ""), 10*time.Minute)
		e.At(5*time.Minute, func() error {
			e.actor = "nodeclaim.disruption"
			for _, nc := range listClaims(t, e)[:3] {
				if err := e.store.Delete(context.Background(), &nc); err != nil {
					return err
				}
			}
			return nil
		})
		expectNoViolation(t, run(t, e), InvariantBudgets)
	})
}

// A disrupted taint on a node no NodeClaim owns (a static node) is
// reported after the grace: no decision can hold it.
func TestInvariantStrayTaintOnUnmanagedNode(t *testing.T) {
	e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 10*time.Minute)
	e.At(time.Minute, func() error {
		return e.store.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "static-1"}})
	})
	e.At(5*time.Minute, func() error {
		ctx := context.Background()
		n := &corev1.Node{}
		if err := e.store.Get(ctx, client.ObjectKey{Name: "static-1"}, n); err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		e.actor = actorDisruption
		return e.store.Update(ctx, n)
	})
	v := expectViolation(t, run(t, e), InvariantNoStrayTaint, 5*time.Minute+TaintGrace, 5*time.Minute+TaintGrace+checkEvery, "node/static-1")
	if !strings.Contains(v.Message, "has no NodeClaim") {
		t.Errorf("message %q: want the missing NodeClaim named", v.Message)
	}
}

// A disrupted taint the disruption loop put on, on a NodeClaim the
// interruption controller then holds (the loop leaves the taint to it, as
// in chaos-aws seed 156), has the interruption controller's grace.
func TestInvariantStrayTaintHeldByInterruption(t *testing.T) {
	e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 12*time.Minute)
	var node string
	e.At(5*time.Minute+5*time.Second, func() error {
		ctx := context.Background()
		nc := listClaims(t, e)[0]
		node = nc.Status.NodeName
		nc.Annotations = map[string]string{interruption.AnnotationInterruption: "SpotInterruption"}
		e.actor = actorScenario
		if err := e.store.Update(ctx, &nc); err != nil {
			return err
		}
		n := &corev1.Node{}
		if err := e.store.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		e.actor = actorDisruption
		return e.store.Update(ctx, n)
	})
	start := 5*time.Minute + 5*time.Second
	expectViolation(t, run(t, e), InvariantNoStrayTaint, start+InterruptionTaintGrace, start+InterruptionTaintGrace+checkEvery, "node/"+node)
}
