package provisioning

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitFor runs b.Wait in the background and reports when it returns.
func waitFor(ctx context.Context, b *Batcher) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- b.Wait(ctx) }()
	return done
}

// settle waits until the batcher is blocked on the fake clock's timers.
func settle(t *testing.T, clk *clocktesting.FakeClock, waiters int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiters() < waiters {
		if time.Now().After(deadline) {
			t.Fatalf("the batcher never waited on %d timers", waiters)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedSoon reports whether the window closed within a short while: used
// only to check that it stayed open (a slow goroutine can only make the check
// weaker, never fail it).
func closedSoon(done <-chan bool) bool {
	select {
	case <-done:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// mustClose fails unless the window closes.
func mustClose(t *testing.T, done <-chan bool) {
	t.Helper()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait reported no batch")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the window did not close")
	}
}

func TestWindowClosesAfterTheIdleGap(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	b := NewBatcher(clk, time.Second, 10*time.Second)
	done := waitFor(context.Background(), b)
	b.Trigger()
	settle(t, clk, 1)
	clk.Step(900 * time.Millisecond)
	if closedSoon(done) {
		t.Fatal("the window closed before the idle gap")
	}
	settle(t, clk, 1)
	clk.Step(200 * time.Millisecond)
	mustClose(t, done)
}

func TestTriggersExtendTheWindowUpToMax(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	b := NewBatcher(clk, time.Second, 3*time.Second)
	done := waitFor(context.Background(), b)
	b.Trigger()
	// A pod every 800ms keeps the window open past the 1s idle gap...
	for range 3 {
		settle(t, clk, 1)
		clk.Step(800 * time.Millisecond)
		b.Trigger()
		if closedSoon(done) {
			t.Fatalf("the window closed at %v while pods kept coming", clk.Now())
		}
	}
	// ...but not past max: at 2.4s it is open, at 3s it closes.
	settle(t, clk, 1)
	clk.Step(600 * time.Millisecond)
	mustClose(t, done)
}

func TestWaitEndsWithTheContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := waitFor(ctx, b)
	cancel()
	if got := <-done; got {
		t.Error("Wait reported a batch after the context ended")
	}
}
