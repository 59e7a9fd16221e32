package simulator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/controller/garbagecollection"
	"github.com/nodewright/nodewright/providers/kwok"
)

// tagNodeClaim is the tag Nodewright's AWS provider puts on an instance:
// the NodeClaim it was launched for.
const tagNodeClaim = "karpenter.sh/nodeclaim"

// orphanSlack is how long after an instance becomes collectable (no
// NodeClaim, older than MinInstanceAge) garbage collection may take to
// start terminating it: a slow round, and a check.
const orphanSlack = garbagecollection.SlowInterval + checkEvery

// instance is one the cloud runs, as the checks see it.
type instance struct {
	providerID string
	// nodeClaim is the NodeClaim it was launched for.
	nodeClaim string
	// object names it in violations.
	object  string
	created time.Time
}

// liveInstances are the cloud's instances not being terminated: the fake
// AWS's (tagged with their NodeClaim), else the Nodes the kwok provider
// created (named after theirs), sorted by provider ID.
func (c *checker) liveInstances() []instance {
	var out []instance
	if c.e.aws != nil {
		for _, in := range c.e.aws.Instances() {
			if in.State == "shutting-down" || in.State == "terminated" {
				continue
			}
			id := fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)
			out = append(out, instance{providerID: id, nodeClaim: in.Tags[tagNodeClaim], object: "instance/" + id, created: in.LaunchTime})
		}
	} else {
		for name, n := range c.nodes {
			if !n.deleting && strings.HasPrefix(n.providerID, kwok.ProviderIDPrefix) {
				out = append(out, instance{providerID: n.providerID, nodeClaim: name, object: "node/" + name, created: n.created})
			}
		}
	}
	slices.SortFunc(out, func(a, b instance) int { return cmp.Compare(a.providerID, b.providerID) })
	return out
}

// checkInstances: at most one instance per NodeClaim, and none without a
// NodeClaim once garbage collection has had its grace.
func (c *checker) checkInstances(now time.Time) {
	instances := c.liveInstances()
	recorded := make(map[string]bool, len(c.claims))
	for _, s := range c.claims {
		if s.providerID != "" {
			recorded[s.providerID] = true
		}
	}
	byClaim := map[string][]instance{}
	live := make(map[string]bool, len(instances))
	for _, in := range instances {
		live[in.providerID] = true
		if in.nodeClaim != "" {
			byClaim[in.nodeClaim] = append(byClaim[in.nodeClaim], in)
		}
		// Garbage collection spares an instance a NodeClaim records, or
		// one launched for a NodeClaim that has not recorded it yet.
		if s := c.claims[in.nodeClaim]; recorded[in.providerID] || s != nil && s.providerID == "" {
			delete(c.orphans, in.providerID)
			continue
		}
		since, ok := c.orphans[in.providerID]
		if !ok {
			since = now
			c.orphans[in.providerID] = now
		}
		collectable := since
		if young := in.created.Add(garbagecollection.MinInstanceAge); young.After(collectable) {
			collectable = young
		}
		if now.Sub(collectable) > orphanSlack {
			c.record(InvariantNoOrphanInstance, in.providerID, []string{in.object, "nodeclaim/" + in.nodeClaim},
				"instance %s (launched for nodeclaim %s at %s) has had no NodeClaim since %s: garbage collection should have terminated it by %s",
				in.providerID, in.nodeClaim, c.offset(in.created), c.offset(since), c.offset(collectable.Add(orphanSlack)))
		}
	}
	for id := range c.orphans {
		if !live[id] {
			delete(c.orphans, id)
		}
	}
	for _, claim := range slices.Sorted(maps.Keys(byClaim)) {
		ins := byClaim[claim]
		if len(ins) < 2 {
			continue
		}
		objects := []string{"nodeclaim/" + claim}
		ids := make([]string, len(ins))
		for i, in := range ins {
			objects = append(objects, in.object)
			ids[i] = in.providerID
		}
		c.record(InvariantOneInstance, claim, objects, "nodeclaim %s has %d live instances: %s", claim, len(ins), strings.Join(ids, ", "))
	}
}

// offset renders a time as the offset from the simulation's start.
func (c *checker) offset(t time.Time) string { return t.Sub(c.e.opts.Start).String() }

// checkLimits: a launch this instant took no pool's launched capacity (its
// NodeClaims with an instance, deleting ones too) above its spec.limits.
func (c *checker) checkLimits() {
	if len(c.launched) == 0 {
		return
	}
	for _, pool := range slices.Sorted(maps.Keys(c.launched)) {
		launchedNow := c.launched[pool]
		np := c.pools[pool]
		if np == nil || len(np.Spec.Limits) == 0 {
			continue
		}
		usage := corev1.ResourceList{}
		nodes := int64(0)
		for _, s := range c.claims {
			if s.pool != pool || s.providerID == "" {
				continue
			}
			nodes++
			for name := range np.Spec.Limits {
				q := usage[name]
				q.Add(s.capacity[name])
				usage[name] = q
			}
		}
		usage["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
		for _, name := range slices.Sorted(maps.Keys(np.Spec.Limits)) {
			limit, used := np.Spec.Limits[name], usage[name]
			if used.Cmp(limit) <= 0 {
				continue
			}
			objects := []string{"nodepool/" + pool}
			for _, claim := range launchedNow {
				objects = append(objects, "nodeclaim/"+claim)
			}
			c.record(InvariantLimits, pool+"/"+string(name), objects, "launching nodeclaim %s took nodepool %s's %s to %s, above its limit %s",
				strings.Join(launchedNow, ", "), pool, name, used.String(), limit.String())
		}
	}
	clear(c.launched)
}
