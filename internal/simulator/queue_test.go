package simulator

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A reconcile asked for again while it waits is held once, at the earlier
// time, as controller-runtime's delaying queue does.
func TestTimersHoldAReconcileOnce(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	w := work{controller: 1, req: reconcile.Request{NamespacedName: client.ObjectKey{Name: "a"}}}
	other := work{controller: 1, req: reconcile.Request{NamespacedName: client.ObjectKey{Name: "b"}}}
	var ts timers
	ts.add(start.Add(5*time.Minute), &w, nil)
	ts.add(start.Add(3*time.Minute), &w, nil)
	ts.add(start.Add(7*time.Minute), &w, nil)
	ts.add(start.Add(4*time.Minute), &other, nil)
	if got := ts.due(start.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("due at 2m: %d timers, want none", len(got))
	}
	got := ts.due(start.Add(3 * time.Minute))
	if len(got) != 1 || *got[0].work != w {
		t.Fatalf("due at 3m: %+v, want a once", got)
	}
	got = ts.due(start.Add(time.Hour))
	if len(got) != 1 || *got[0].work != other {
		t.Fatalf("due later: %+v, want only b (a's later requeues folded into the earlier one)", got)
	}
	ts.add(start.Add(2*time.Hour), &w, nil)
	if got := ts.due(start.Add(3 * time.Hour)); len(got) != 1 {
		t.Fatalf("a requeue after delivery: %d timers, want 1", len(got))
	}
}
