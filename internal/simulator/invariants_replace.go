package simulator

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// forcefulActors are Nodewright's controllers that remove nodes without
// waiting for replacements, as Karpenter's forceful paths do: expiration
// (nodeclaim.disruption), liveness and launch failures
// (nodeclaim.lifecycle), interruption and garbage collection.
var forcefulActors = map[string]bool{"nodeclaim.disruption": true, "nodeclaim.lifecycle": true, actorInterruption: true, actorGarbageCollection: true}

// splitNames splits a comma-separated list of names, dropping empty ones.
func splitNames(list string) []string {
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// replacementsOf are the replacements of a candidate's decision: those its
// ReplacementsAnnotation names, and the NodeClaims whose
// ReplacingAnnotation names it (a decision may be read from either end),
// sorted.
func (c *checker) replacementsOf(candidate string, s *claimState) []string {
	names := map[string]bool{}
	for _, name := range splitNames(s.replacements) {
		names[name] = true
	}
	for name, r := range c.claims {
		if slices.Contains(r.replacing, candidate) {
			names[name] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// checkReplacements: a candidate of a disruption decision (a NodeClaim
// marked with a voluntary DisruptionReason or naming replacements) is
// removed (how: its NodeClaim deleted, its Node deleted, its instance
// gone) only once every replacement of its decision exists and is
// Initialized, whichever of Nodewright's controllers removes it. Removals
// by forceful paths (forcefulActors), the cluster or a user are not
// checked; an instance gone without a termination asked for (byCloud) is,
// unless a fault took it.
func (c *checker) checkReplacements(candidate string, s *claimState, how string, byCloud bool) {
	actor := c.e.actor
	if !byCloud && c.instanceGone(s.providerID) {
		// Its instance went first (Nodewright reacts to that by
		// deleting the Node and NodeClaim): that is the removal.
		how, byCloud = "terminated instance "+s.providerID+" of nodeclaim "+candidate, true
	}
	switch {
	case !voluntary(s.reason) && s.replacements == "", c.cloudTook[s.providerID]:
		return // not a candidate, or a fault took its instance first
	case !byCloud && (!nodewrightActor(actor) || forcefulActors[actor]):
		return
	}
	replacements := c.replacementsOf(candidate, s)
	if len(replacements) == 0 {
		return
	}
	objects := []string{"nodeclaim/" + candidate}
	if s.nodeName != "" {
		objects = append(objects, "node/"+s.nodeName)
	}
	var wrong []string
	for _, name := range replacements {
		objects = append(objects, "nodeclaim/"+name)
		switch r := c.claims[name]; {
		case r == nil:
			wrong = append(wrong, name+" does not exist")
		case !r.initialized:
			wrong = append(wrong, name+" is not initialized")
		}
	}
	if len(wrong) > 0 {
		who := actorLabel(actor)
		if byCloud {
			who = "no fault took it, yet"
		}
		c.record(InvariantReplaceFirst, candidate, objects, "%s %s while its replacement %s", who, how, strings.Join(wrong, ", "))
	}
}

// actorLabel names a writer in messages.
func actorLabel(actor string) string {
	switch actor {
	case actorDisruption:
		return "the disruption loop"
	case "":
		return "the simulation"
	}
	return "controller " + actor
}

// nodeRemoved checks the replacements of the NodeClaim of a node being
// deleted (or gone without a deletion seen). The fake AWS's node
// lifecycle deletes a Node whose instance is gone: that is the instance's
// removal.
func (c *checker) nodeRemoved(name string, n *nodeState) {
	claim, s := c.claimOfNode(name, n)
	if s == nil || s.deleting || s.instanceTerminating {
		return
	}
	if strings.HasPrefix(c.e.actor, "fakeaws.") {
		c.checkReplacements(claim, s, "terminated instance "+s.providerID+" of nodeclaim "+claim, true)
		return
	}
	c.checkReplacements(claim, s, "deleted node "+name+" of nodeclaim "+claim, false)
}

// checkInstancesGone: with the fake AWS, a candidate whose instance
// terminated though its NodeClaim is not being deleted (Nodewright's
// provider terminates only those) lost its node; the cloud taking it on
// its own (a vanished instance fault) is not checked.
func (c *checker) checkInstancesGone() {
	if c.e.aws == nil {
		return
	}
	gone := map[string]bool{}
	for _, in := range c.e.aws.Instances() {
		if in.State == "shutting-down" || in.State == "terminated" {
			gone[fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.claims)) {
		s := c.claims[name]
		if s.providerID == "" || s.deleting || s.instanceTerminating || !gone[s.providerID] || c.cloudTook[s.providerID] {
			continue
		}
		c.checkReplacements(name, s, "terminated instance "+s.providerID+" of nodeclaim "+name, true)
	}
}

// instanceGone: with the fake AWS, the instance is shutting down or
// terminated.
func (c *checker) instanceGone(providerID string) bool {
	if c.e.aws == nil || providerID == "" {
		return false
	}
	for _, in := range c.e.aws.Instances() {
		if fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID) == providerID {
			return in.State == "shutting-down" || in.State == "terminated"
		}
	}
	return false
}
