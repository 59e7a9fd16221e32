package simulator

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

// claimState is what the checks need of a NodeClaim.
type claimState struct {
	pool, providerID, nodeName, instanceType string
	capacity                                 corev1.ResourceList
	initialized, instanceTerminating         bool
	deleting                                 bool
	// reason is the DisruptionReason condition's reason while it is True.
	reason       karpv1.DisruptionReason
	replacements string
	// replacing: the candidates this NodeClaim was created to replace
	// (cdisruption.ReplacingAnnotation).
	replacing []string
	// interrupted: the AWS interruption controller holds it (an
	// interruption notice is being handled: its taint is that
	// controller's, whoever put it on first).
	interrupted bool
	// deadline is the termination deadline (terminationGracePeriod), if
	// stamped.
	deadline *time.Time
}

func claimStateOf(nc *karpv1.NodeClaim) *claimState {
	s := &claimState{pool: nc.Labels[karpv1.LabelNodePool], providerID: nc.Status.ProviderID, nodeName: nc.Status.NodeName,
		instanceType: nc.Labels[corev1.LabelInstanceTypeStable], capacity: nc.Status.Capacity,
		initialized:         meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized),
		instanceTerminating: meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInstanceTerminating),
		deleting:            nc.DeletionTimestamp != nil, replacements: nc.Annotations[cdisruption.ReplacementsAnnotation],
		replacing: splitNames(nc.Annotations[cdisruption.ReplacingAnnotation])}
	_, s.interrupted = nc.Annotations[interruption.AnnotationInterruption]
	if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == "True" {
		s.reason = karpv1.DisruptionReason(c.Reason)
	}
	if v := nc.Annotations[karpv1.AnnotationNodeClaimTerminationTime]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			s.deadline = &t
		}
	}
	return s
}

// voluntary: a reason the disruption loop disrupts for, under budgets.
func voluntary(r karpv1.DisruptionReason) bool {
	return r == karpv1.DisruptionReasonEmpty || r == karpv1.DisruptionReasonDrifted || r == karpv1.DisruptionReasonUnderutilized
}

// claimChanged follows a NodeClaim's transitions.
func (c *checker) claimChanged(nc *karpv1.NodeClaim, deleted bool) {
	key := "nodeclaim/" + nc.Name
	old := c.claims[nc.Name]
	if deleted {
		if old != nil {
			c.dirty = true
			c.note(key, "gone (by %s)", c.actorName())
			delete(c.claims, nc.Name)
			c.forget(key)
		}
		return
	}
	cur := claimStateOf(nc)
	if old == nil {
		c.note(key, "created in nodepool %s", cur.pool)
		old = &claimState{}
	}
	if cur.providerID != old.providerID || old.pool == "" {
		c.dirty = true
	}
	switch {
	case cur.providerID != "" && old.providerID == "":
		c.note(key, "launched %s (%s)", cur.providerID, cur.instanceType)
		c.launched[cur.pool] = append(c.launched[cur.pool], nc.Name)
	case cur.providerID != "" && grew(old.capacity, cur.capacity):
		c.note(key, "capacity grew")
		c.launched[cur.pool] = append(c.launched[cur.pool], nc.Name)
	}
	if cur.initialized && !old.initialized {
		c.note(key, "initialized")
	}
	if cur.reason != old.reason {
		if cur.reason == "" {
			c.note(key, "DisruptionReason cleared by %s", c.actorName())
		} else {
			c.note(key, "DisruptionReason %s set by %s", cur.reason, c.actorName())
			if voluntary(cur.reason) {
				c.disrupting = append(c.disrupting, startedDisrupting{nc.Name, cur.reason})
			}
		}
	}
	if cur.replacements != old.replacements && cur.replacements != "" {
		c.note(key, "replacements %s", cur.replacements)
	}
	if cur.instanceTerminating && !old.instanceTerminating {
		c.note(key, "instance terminating")
	}
	if cur.deleting && !old.deleting {
		c.note(key, "deleting (by %s)", c.actorName())
		c.checkReplacements(nc.Name, cur, "deleted nodeclaim "+nc.Name, false)
		if c.e.actor == actorDisruption && !voluntary(cur.reason) {
			// Deleted by the loop without being marked first: it starts
			// disrupting now (a marked one was checked as marked, and
			// budgets are not checked again as a decision is carried out).
			c.disrupting = append(c.disrupting, startedDisrupting{nc.Name, ""})
		}
	}
	c.claims[nc.Name] = cur
	c.checkBudgets(c.now())
}

func (c *checker) actorName() string {
	if c.e.actor == "" {
		return "the simulation"
	}
	return c.e.actor
}

// nodeState is what the checks need of a Node.
type nodeState struct {
	providerID string
	created    time.Time
	ready      bool
	deleting   bool
	// taintedAt is when the disrupted taint went on (zero: not tainted),
	// by tainter.
	taintedAt time.Time
	tainter   string
}

func hasDisruptedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeChanged follows a Node's transitions.
func (c *checker) nodeChanged(n *corev1.Node, deleted bool) {
	key := "node/" + n.Name
	old := c.nodes[n.Name]
	if deleted {
		if old != nil {
			c.dirty = true
			c.note(key, "gone (by %s)", c.actorName())
			if !old.deleting {
				c.nodeRemoved(n.Name, old)
			}
			delete(c.nodes, n.Name)
			c.forget(key)
		}
		return
	}
	cur := &nodeState{providerID: n.Spec.ProviderID, created: n.CreationTimestamp.Time, ready: nodeReady(n), deleting: n.DeletionTimestamp != nil}
	if old == nil {
		c.note(key, "created (%s)", cur.providerID)
		old = &nodeState{}
	}
	if cur.providerID != old.providerID || cur.deleting != old.deleting {
		c.dirty = true
	}
	if cur.ready != old.ready {
		if cur.ready {
			c.note(key, "Ready")
		} else {
			c.note(key, "not Ready")
		}
	}
	switch tainted := hasDisruptedTaint(n); {
	case tainted && old.taintedAt.IsZero():
		cur.taintedAt, cur.tainter = c.now(), c.actorName()
		c.note(key, "tainted %s:NoSchedule by %s", karpv1.TaintKeyDisrupted, cur.tainter)
	case tainted:
		cur.taintedAt, cur.tainter = old.taintedAt, old.tainter
	case !old.taintedAt.IsZero():
		c.note(key, "untainted by %s", c.actorName())
	}
	if cur.deleting && !old.deleting {
		c.note(key, "deleting (by %s)", c.actorName())
		c.nodeRemoved(n.Name, cur)
	}
	c.nodes[n.Name] = cur
}

// claimOfNode finds the NodeClaim of a node: by provider ID, else by the
// node name it recorded.
func (c *checker) claimOfNode(name string, n *nodeState) (string, *claimState) {
	for _, claimName := range slices.Sorted(maps.Keys(c.claims)) {
		s := c.claims[claimName]
		if n.providerID != "" && s.providerID == n.providerID || s.nodeName == name {
			return claimName, s
		}
	}
	return "", nil
}

// grew: some resource of after is larger than in before.
func grew(before, after corev1.ResourceList) bool {
	for name, q := range after {
		if was, ok := before[name]; !ok || q.Cmp(was) > 0 {
			return true
		}
	}
	return false
}
