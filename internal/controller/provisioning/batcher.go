package provisioning

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Batcher groups triggers into windows: a window opens at the first trigger
// and closes once no trigger has come for Idle, or Max after it opened,
// whichever is first (Karpenter's BATCH_IDLE_DURATION and
// BATCH_MAX_DURATION, 1 s and 10 s by default). Closing is decided from the
// recorded times of the opening and the last trigger, so it does not depend
// on when the waiting goroutine happens to run.
type Batcher struct {
	clock     clock.Clock
	idle, max time.Duration
	wake      chan struct{}

	mu   sync.Mutex
	last time.Time
}

// NewBatcher returns a batcher on clk.
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{clock: clk, idle: idle, max: max, wake: make(chan struct{}, 1)}
}

// Trigger notes that something (a pending pod) wants a decision. It never
// blocks.
func (b *Batcher) Trigger() {
	b.mu.Lock()
	b.last = b.clock.Now()
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until a window has opened and closed, and reports whether it
// did (false when ctx ended first).
func (b *Batcher) Wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.wake:
	}
	opened := b.clock.Now()
	for {
		b.mu.Lock()
		closeAt := b.last.Add(b.idle)
		b.mu.Unlock()
		if limit := opened.Add(b.max); limit.Before(closeAt) {
			closeAt = limit
		}
		now := b.clock.Now()
		if !now.Before(closeAt) {
			select { // triggers during the window belong to it
			case <-b.wake:
			default:
			}
			return true
		}
		timer := b.clock.NewTimer(closeAt.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
		}
	}
}
