package state

import (
	"time"
)

// ForgetMissing forgets the NodeClaims and Nodes the model holds but the
// API server no longer does (nodeClaims and nodes name every one it holds)
// once each has been missing for grace: a deletion whose event never
// reached the model (an object created and deleted across a watch relist)
// would otherwise hold its pods' nominations and count toward its pool's
// limits forever. Grace covers the ordinary lags: a NodeClaim recorded by
// the provisioner before its informer delivers it, a delete event on its
// way. A NodeClaim forgotten drops the nominations onto it (as
// DeleteNodeClaim). It returns the names of the NodeClaims and Nodes
// forgotten.
func (c *Cluster) ForgetMissing(nodeClaims, nodes []string, grace time.Duration) (forgotClaims, forgotNodes []string) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	since := map[string]time.Time{}
	sweep := func(kind string, model []string, present []string) []string {
		in := make(map[string]bool, len(present))
		for _, n := range present {
			in[n] = true
		}
		var gone []string
		for _, n := range model {
			if in[n] {
				continue
			}
			k := kind + "/" + n
			first, ok := c.missingSince[k]
			if !ok {
				first = now
			}
			if now.Sub(first) >= grace {
				gone = append(gone, n)
				continue
			}
			since[k] = first
		}
		return gone
	}
	forgotClaims = sweep("NodeClaim", sortedKeys(c.nodeClaims, name), nodeClaims)
	forgotNodes = sweep("Node", sortedKeys(c.nodes, name), nodes)
	c.missingSince = since
	if len(forgotClaims)+len(forgotNodes) == 0 {
		return nil, nil
	}
	c.version++
	for _, n := range forgotClaims {
		delete(c.nodeClaims, n)
		for k, nom := range c.nominated {
			if nom.target == n {
				delete(c.nominated, k)
			}
		}
	}
	for _, n := range forgotNodes {
		delete(c.nodes, n)
		c.trackNode(n, nil)
	}
	return forgotClaims, forgotNodes
}
