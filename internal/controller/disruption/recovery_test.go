package disruption

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// persistDecision writes on web-1 what a previous loop leaves of a
// Drifted replace decision: the DisruptionReason condition, the
// replacements annotation set to replacements, the node tainted.
func persistDecision(t *testing.T, e env, replacements string) {
	t.Helper()
	ctx := context.Background()
	nc := e.claim(t)
	nc.Annotations = map[string]string{ReplacementsAnnotation: replacements}
	if err := e.kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
		Reason: string(karpv1.DisruptionReasonDrifted), LastTransitionTime: metav1.NewTime(epoch)})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "web-1"}, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	if err := e.kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	syncModel(t, e.kube, e.cluster)
}

// otherClaim is a NodeClaim of the batch pool, initialized or still
// starting, with annotations.
func otherClaim(name string, initialized bool, annotations map[string]string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "batch"}, Annotations: annotations}}
	if initialized {
		nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(epoch)}}
	}
	return nc
}

// recoverFor runs a new loop (a restarted process) for passes passes, 10 s
// apart, and returns its last error.
func recoverFor(t *testing.T, e env, passes int) error {
	t.Helper()
	l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), nil, Options{ReplacementTimeout: time.Minute})
	var last error
	for range passes {
		_, last = l.Pass(context.Background())
		syncModel(t, e.kube, e.cluster)
		e.clock.Step(10 * time.Second)
	}
	if !l.recovered {
		t.Errorf("the loop never finished recovering persisted decisions: %v", last)
	}
	return last
}

// rolledBack reports what is left of web-1's decision: "" if web-1 is kept,
// untainted and unmarked.
func rolledBack(t *testing.T, e env) string {
	t.Helper()
	c := e.claim(t)
	switch {
	case c.DeletionTimestamp != nil:
		return "web-1 (pods on it) was deleted with no replacement made for it"
	case tainted(context.Background(), t, e.kube):
		return "web-1's node is still tainted"
	case meta.FindStatusCondition(c.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil:
		return "web-1 still has a DisruptionReason"
	case c.Annotations[ReplacementsAnnotation] != "":
		return "web-1 still has " + ReplacementsAnnotation
	}
	return ""
}

// A recovered decision whose replacements annotation names NodeClaims it
// did not create (another pool's node, hand-edited or stale) deletes
// neither them nor the candidate: it is rolled back, deleting only the
// replacements stamped as its own.
func TestRecoveredDecisionNeverDeletesANodeClaimItDidNotCreate(t *testing.T) {
	ours := map[string]string{ReplacingAnnotation: "web-1"}
	for _, tc := range []struct {
		name   string
		named  string
		claims []*karpv1.NodeClaim
		// gone: the NodeClaims the rollback must delete.
		gone []string
	}{
		{name: "a foreign NodeClaim still starting", named: "batch-7", claims: []*karpv1.NodeClaim{otherClaim("batch-7", false, nil)}},
		{name: "a foreign NodeClaim initialized", named: "batch-7", claims: []*karpv1.NodeClaim{otherClaim("batch-7", true, nil)}},
		{name: "a NodeClaim replacing another candidate", named: "batch-7", claims: []*karpv1.NodeClaim{otherClaim("batch-7", true, map[string]string{ReplacingAnnotation: "web-9"})}},
		{name: "its own replacement starting and a foreign one", named: "default-1,batch-7",
			claims: []*karpv1.NodeClaim{otherClaim("default-1", false, ours), otherClaim("batch-7", false, nil)}, gone: []string{"default-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objs := []client.Object{boundPod("a")}
			for _, c := range tc.claims {
				objs = append(objs, c)
			}
			e := newEnv(t, objs...)
			persistDecision(t, e, tc.named)
			if err := recoverFor(t, e, 20); err != nil {
				t.Errorf("last pass: %v", err)
			}
			for _, c := range tc.claims {
				got := &karpv1.NodeClaim{}
				err := e.kube.Get(ctx, client.ObjectKey{Name: c.Name}, got)
				deleted := err != nil || got.DeletionTimestamp != nil
				if want := slices.Contains(tc.gone, c.Name); deleted != want {
					t.Errorf("NodeClaim %s deleted %v (get: %v), want %v", c.Name, deleted, err, want)
				}
			}
			if what := rolledBack(t, e); what != "" {
				t.Error(what)
			}
		})
	}
}

// A recovered decision whose replacements annotation is malformed (empty
// or invalid names, duplicates, the candidate itself) is rolled back like
// any interrupted decision: nothing deleted, web-1's node untainted, its
// marks cleared, and the loop goes on.
func TestRecoveredDecisionWithMalformedReplacementsIsRolledBack(t *testing.T) {
	for _, value := range []string{",", "a,,b", " ", "Not_A_Name", "web-1", "default-1,web-1", "default-1,default-1"} {
		t.Run(value, func(t *testing.T) {
			e := newEnv(t, boundPod("a"))
			persistDecision(t, e, value)
			if err := recoverFor(t, e, 5); err != nil {
				t.Errorf("last pass: %v", err)
			}
			if what := rolledBack(t, e); what != "" {
				t.Error(what)
			}
		})
	}
}
