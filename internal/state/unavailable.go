package state

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// UnavailableOfferings remembers offerings a launch was refused for
// (insufficient capacity), for a TTL (Karpenter: 3 minutes), so decisions
// in the meantime avoid them.
type UnavailableOfferings struct {
	clock clock.Clock
	ttl   time.Duration

	mu    sync.Mutex
	until map[offeringKey]time.Time
}

type offeringKey struct{ instanceType, zone, capacityType string }

// DefaultUnavailableTTL is how long a refused offering is avoided.
const DefaultUnavailableTTL = 3 * time.Minute

// NewUnavailableOfferings returns an empty cache on clk.
func NewUnavailableOfferings(clk clock.Clock, ttl time.Duration) *UnavailableOfferings {
	return &UnavailableOfferings{clock: clk, ttl: ttl, until: map[offeringKey]time.Time{}}
}

// MarkUnavailable records a refused offering.
func (u *UnavailableOfferings) MarkUnavailable(instanceType, zone, capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[offeringKey{instanceType, zone, capacityType}] = u.clock.Now().Add(u.ttl)
}

// IsUnavailable reports whether an offering is still being avoided; it fits
// sched.Input.Unavailable.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := offeringKey{instanceType, zone, capacityType}
	until, ok := u.until[k]
	if ok && !u.clock.Now().Before(until) {
		delete(u.until, k)
		return false
	}
	return ok
}
