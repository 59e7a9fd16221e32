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

	mu     sync.Mutex
	open   bool
	opened time.Time // first trigger of the open window
	last   time.Time // latest trigger
}

// NewBatcher returns a batcher on clk.
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{clock: clk, idle: idle, max: max, wake: make(chan struct{}, 1)}
}

// Trigger notes that something (a pending pod) wants a decision, opening a
// window if none is open. It never blocks.
func (b *Batcher) Trigger() {
	b.mu.Lock()
	now := b.clock.Now()
	if !b.open {
		b.open, b.opened = true, now
	}
	b.last = now
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// CloseAt is when the open window closes; false when no window is open.
func (b *Batcher) CloseAt() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return time.Time{}, false
	}
	closeAt := b.last.Add(b.idle)
	if limit := b.opened.Add(b.max); limit.Before(closeAt) {
		closeAt = limit
	}
	return closeAt, true
}

// Close ends the open window: the decision it waited for is being made,
// and later triggers open the next one.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.open = false
	b.mu.Unlock()
	select {
	case <-b.wake:
	default:
	}
}

// Wait blocks until a window has opened and closed, closes it, and reports
// whether it did (false when ctx ended first).
func (b *Batcher) Wait(ctx context.Context) bool {
	for {
		closeAt, open := b.CloseAt()
		if !open {
			select {
			case <-ctx.Done():
				return false
			case <-b.wake:
			}
			continue
		}
		now := b.clock.Now()
		if !now.Before(closeAt) {
			b.Close()
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
