package disruption

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func pool(budgets ...karpv1.Budget) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.Budgets = budgets
	return np
}

func ptr[T any](v T) *T { return &v }

func TestAllowed(t *testing.T) {
	// Monday 2026-11-30 10:30 UTC.
	now := time.Date(2026, 11, 30, 10, 30, 0, 0, time.UTC)
	weekdayMornings := karpv1.Budget{Nodes: "0", Schedule: ptr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}
	cases := []struct {
		name       string
		np         *karpv1.NodePool
		reason     karpv1.DisruptionReason
		total      int
		disrupting int
		at         time.Time
		want       int
	}{
		{"no budget: 10% rounded up", pool(), karpv1.DisruptionReasonEmpty, 11, 0, now, 2},
		{"count", pool(karpv1.Budget{Nodes: "3"}), karpv1.DisruptionReasonEmpty, 100, 0, now, 3},
		{"percentage rounds up", pool(karpv1.Budget{Nodes: "25%"}), karpv1.DisruptionReasonEmpty, 5, 0, now, 2},
		{"nodes disrupting already count", pool(karpv1.Budget{Nodes: "3"}), karpv1.DisruptionReasonEmpty, 100, 2, now, 1},
		{"never below zero", pool(karpv1.Budget{Nodes: "1"}), karpv1.DisruptionReasonEmpty, 100, 4, now, 0},
		{"the most restrictive wins", pool(karpv1.Budget{Nodes: "50%"}, karpv1.Budget{Nodes: "2"}), karpv1.DisruptionReasonEmpty, 10, 0, now, 2},
		{"a budget for other reasons does not apply",
			pool(karpv1.Budget{Nodes: "10"}, karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}),
			karpv1.DisruptionReasonEmpty, 100, 0, now, 10},
		{"a budget for this reason applies",
			pool(karpv1.Budget{Nodes: "10"}, karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}),
			karpv1.DisruptionReasonEmpty, 100, 0, now, 0},
		{"inside the schedule window", pool(karpv1.Budget{Nodes: "10"}, weekdayMornings), karpv1.DisruptionReasonEmpty, 100, 0, now, 0},
		{"after the window closes", pool(karpv1.Budget{Nodes: "10"}, weekdayMornings), karpv1.DisruptionReasonEmpty, 100, 0, now.Add(7 * time.Hour), 10},
		{"before it opens", pool(karpv1.Budget{Nodes: "10"}, weekdayMornings), karpv1.DisruptionReasonEmpty, 100, 0, now.Add(-2 * time.Hour), 10},
		{"not on Saturday", pool(karpv1.Budget{Nodes: "10"}, weekdayMornings), karpv1.DisruptionReasonEmpty, 100, 0, now.Add(5 * 24 * time.Hour), 10},
		{"@daily macro", pool(karpv1.Budget{Nodes: "10"}, karpv1.Budget{Nodes: "1", Schedule: ptr("@daily"), Duration: &metav1.Duration{Duration: 12 * time.Hour}}),
			karpv1.DisruptionReasonEmpty, 100, 0, now, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, explain, err := Allowed(tc.np, tc.reason, tc.total, tc.disrupting, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Allowed = %d (%s), want %d", got, explain, tc.want)
			}
		})
	}
}

func TestAllowedRejectsBadBudgets(t *testing.T) {
	now := time.Now()
	for _, b := range []karpv1.Budget{
		{Nodes: "lots"},
		{Nodes: "120%"},
		{Nodes: "1", Schedule: ptr("every day")},
		{Nodes: "1", Schedule: ptr("@daily")},
	} {
		if _, _, err := Allowed(pool(b), karpv1.DisruptionReasonEmpty, 10, 0, now); err == nil || !strings.Contains(err.Error(), "spec.disruption.budgets[0]") {
			t.Errorf("budget %+v: %v, want an error naming the budget", b, err)
		}
	}
}
