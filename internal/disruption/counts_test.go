package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Budgets count what Karpenter counts: the pool's managed, initialized
// nodes whose instance is not terminating; of those, the NotReady ones and
// those being deleted or disrupted are already disrupting. Percentages of
// that base round up.
func TestPoolCountsBudgetBase(t *testing.T) {
	np := pool(karpv1.Budget{Nodes: "10%"})
	ready := func(name string) Candidate { return candidate(name, np, time.Minute) }
	unregistered := func(name string) Candidate { c := ready(name); c.Node = nil; return c }
	uninitialized := func(name string) Candidate {
		c := ready(name)
		c.NodeClaim.Status.Conditions = nil
		return c
	}
	notReady := func(name string) Candidate {
		c := ready(name)
		c.Node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		return c
	}
	deleting := func(name string) Candidate {
		c := ready(name)
		c.NodeClaim.DeletionTimestamp = &metav1.Time{Time: epoch}
		return c
	}
	nodeDeleting := func(name string) Candidate {
		c := ready(name)
		c.Node.DeletionTimestamp = &metav1.Time{Time: epoch}
		return c
	}
	tainted := func(name string) Candidate {
		c := ready(name)
		c.Node.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
		return c
	}
	marked := func(name string) Candidate {
		c := ready(name)
		c.NodeClaim.Status.Conditions = append(c.NodeClaim.Status.Conditions,
			metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: string(karpv1.DisruptionReasonDrifted)})
		return c
	}
	terminating := func(name string) Candidate {
		c := deleting(name)
		c.NodeClaim.Status.Conditions = append(c.NodeClaim.Status.Conditions,
			metav1.Condition{Type: karpv1.ConditionTypeInstanceTerminating, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeInstanceTerminating})
		return c
	}
	many := func(n int, build func(string) Candidate) []Candidate {
		out := make([]Candidate, 0, n)
		for i := range n {
			out = append(out, build(string(rune('a'+i))))
		}
		return out
	}
	for _, tc := range []struct {
		name                      string
		cands                     []Candidate
		wantMembers, wantDisrupts int
		wantAllowed               int
	}{
		{"initialized nodes only", many(10, ready), 10, 0, 1},
		{"unregistered claims are not counted", append(many(10, ready), many(10, unregistered)...), 10, 0, 1},
		{"uninitialized claims are not counted", append(many(10, ready), many(10, uninitialized)...), 10, 0, 1},
		{"a terminating instance is not counted", append(many(9, ready), terminating("z")), 9, 0, 1},
		{"a NotReady node is disrupting", append(many(9, ready), notReady("z")), 10, 1, 0},
		{"a deleting NodeClaim is disrupting", append(many(9, ready), deleting("z")), 10, 1, 0},
		{"a deleting node is disrupting", append(many(9, ready), nodeDeleting("z")), 10, 1, 0},
		{"a tainted node is disrupting", append(many(9, ready), tainted("z")), 10, 1, 0},
		{"a NodeClaim with a DisruptionReason is disrupting", append(many(9, ready), marked("z")), 10, 1, 0},
		{"percent rounds up", many(11, ready), 11, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members, disrupting := PoolCounts(tc.cands)
			if members["default"] != tc.wantMembers || disrupting["default"] != tc.wantDisrupts {
				t.Fatalf("members %d, disrupting %d: want %d, %d", members["default"], disrupting["default"], tc.wantMembers, tc.wantDisrupts)
			}
			allowed, _, err := Allowed(np, karpv1.DisruptionReasonEmpty, members["default"], disrupting["default"], epoch)
			if err != nil {
				t.Fatal(err)
			}
			if allowed != tc.wantAllowed {
				t.Errorf("allowed %d, want %d", allowed, tc.wantAllowed)
			}
		})
	}
}

// Unregistered claims do not widen a percentage budget: ten empty nodes
// and ten claims still launching under "10%" let one node go, not two.
func TestEmptinessBudgetIgnoresUnregisteredClaims(t *testing.T) {
	np := whenEmpty("30s", karpv1.Budget{Nodes: "10%"})
	var cands []Candidate
	for i := range 10 {
		cands = append(cands, candidate("empty-"+string(rune('a'+i)), np, time.Minute))
	}
	for i := range 10 {
		c := candidate("launching-"+string(rune('a'+i)), np, time.Minute)
		c.Node = nil
		c.NodeClaim.Status.Conditions = nil
		cands = append(cands, c)
	}
	d, err := Emptiness(cands, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.Command.Candidates); got != 1 {
		t.Errorf("emptiness takes %d nodes (%s), want 1: 10%% of 10 initialized nodes", got, names(d.Command.Candidates))
	}
}
