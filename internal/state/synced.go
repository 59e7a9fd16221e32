package state

import (
	"sync"
	"time"
)

// syncGate remembers how the model tells whether it is complete, and since
// when it has not been.
type syncGate struct {
	mu sync.Mutex
	// check reports whether the feed has delivered everything; nil: no
	// feed has said so yet.
	check func() bool
	// unsyncedSince is when the model was last seen incomplete after being
	// complete (or created); zero while it is synced.
	unsyncedSince time.Time
}

// SetSyncedFunc tells the model how to tell whether it holds everything the
// API server has. The live feed passes a check that every informer handler
// has been handed its initial list and that every NodeClaim and Node the
// informers' cache holds is in the model. f must not call Synced.
func (c *Cluster) SetSyncedFunc(f func() bool) {
	c.sync.mu.Lock()
	defer c.sync.mu.Unlock()
	c.sync.check = f
}

// MarkSynced declares the model complete from now on: for a feed that
// hands over every change as it happens (the simulator, after its initial
// feed) or a one-off list (`nodewright explain`).
func (c *Cluster) MarkSynced() { c.SetSyncedFunc(func() bool { return true }) }

// Synced reports whether decisions may be made on the model: until its feed
// says it has delivered everything, the model may miss NodeClaims or Nodes,
// and a decision on it could buy capacity twice or remove the wrong node. A
// new model has not synced.
func (c *Cluster) Synced() bool {
	c.sync.mu.Lock()
	check := c.sync.check
	c.sync.mu.Unlock()
	synced := check != nil && check()
	now := c.clock.Now()
	c.sync.mu.Lock()
	defer c.sync.mu.Unlock()
	switch {
	case synced:
		c.sync.unsyncedSince = time.Time{}
	case c.sync.unsyncedSince.IsZero():
		c.sync.unsyncedSince = now
	}
	return synced
}

// UnsyncedFor is how long the model has been incomplete, as of the last
// Synced call (counting from the model's creation); zero once synced.
func (c *Cluster) UnsyncedFor() time.Duration {
	c.sync.mu.Lock()
	defer c.sync.mu.Unlock()
	if c.sync.unsyncedSince.IsZero() {
		return 0
	}
	return c.clock.Since(c.sync.unsyncedSince)
}

// HoldsAll reports whether every named NodeClaim and Node is in the model
// (the model may hold more: a deletion not seen yet, or a NodeClaim the
// provisioner recorded before its informer did).
func (c *Cluster) HoldsAll(nodeClaims, nodes []string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range nodeClaims {
		if _, ok := c.nodeClaims[n]; !ok {
			return false
		}
	}
	for _, n := range nodes {
		if _, ok := c.nodes[n]; !ok {
			return false
		}
	}
	return true
}
