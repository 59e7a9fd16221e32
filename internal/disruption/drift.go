package disruption

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Drift reasons of the core, as Karpenter's (providers add their own).
const (
	DriftNodePool             = "NodePoolDrifted"
	DriftRequirements         = "RequirementsDrifted"
	DriftInstanceTypeNotFound = "InstanceTypeNotFound"
)

// Drifted says why a launched NodeClaim no longer matches its NodePool, or
// "" when it does, checking in Karpenter's order: the template hash (only
// when both carry the same hash version, so a new version never drifts a
// fleet), then the requirements against the NodeClaim's labels, then its
// instance type and offering among types (nil: unknown, not checked).
// Behavioural fields (weight, limits, disruption) are not hashed and never
// drift.
func Drifted(nc *karpv1.NodeClaim, np *karpv1.NodePool, types []*catalog.InstanceType) (reason, message string) {
	if r, m := hashDrift(nc, np); r != "" {
		return r, m
	}
	if m := requirementsDrift(nc, np); m != "" {
		return DriftRequirements, m
	}
	if types != nil {
		if m := offeringGone(nc, types); m != "" {
			return DriftInstanceTypeNotFound, m
		}
	}
	return "", ""
}

func hashDrift(nc *karpv1.NodeClaim, np *karpv1.NodePool) (string, string) {
	version := np.Annotations[karpv1.AnnotationNodePoolHashVersion]
	if version == "" || nc.Annotations[karpv1.AnnotationNodePoolHashVersion] != version {
		return "", ""
	}
	if have, want := nc.Annotations[karpv1.AnnotationNodePoolHash], np.Annotations[karpv1.AnnotationNodePoolHash]; have != "" && want != "" && have != want {
		return DriftNodePool, fmt.Sprintf("the template of NodePool %s changed since the node was launched", np.Name)
	}
	return "", ""
}

// requirementsDrift: a requirement of the pool that the NodeClaim's label
// for its key no longer satisfies. A key the NodeClaim has no label for is
// not judged (its value is unknown).
func requirementsDrift(nc *karpv1.NodeClaim, np *karpv1.NodePool) string {
	for _, r := range np.Spec.Template.Spec.Requirements {
		value, ok := nc.Labels[r.Key]
		if !ok {
			continue
		}
		req, err := requirement.New(r.Key, r.Operator, r.Values...)
		if err != nil {
			continue // the API server validates requirements; nothing to judge
		}
		if !req.Has(value) {
			return fmt.Sprintf("label %s=%s no longer satisfies NodePool %s's requirement %s %s %v", r.Key, value, np.Name, r.Key, r.Operator, r.Values)
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		if have, ok := nc.Labels[k]; ok && have != v {
			return fmt.Sprintf("label %s=%s, NodePool %s now sets %s", k, have, np.Name, v)
		}
	}
	return ""
}

// offeringGone: the NodeClaim's instance type, or its offering (zone and
// capacity type; a reserved node also accepts on-demand), is no longer
// among the pool's.
func offeringGone(nc *karpv1.NodeClaim, types []*catalog.InstanceType) string {
	name := nc.Labels[corev1.LabelInstanceTypeStable]
	if name == "" {
		return ""
	}
	i := slices.IndexFunc(types, func(it *catalog.InstanceType) bool { return it.Name == name })
	if i < 0 {
		return fmt.Sprintf("instance type %s is no longer offered", name)
	}
	zone, ct := nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.LabelCapacityType]
	for _, o := range types[i].Offerings {
		if (zone == "" || o.Zone == zone) && (ct == "" || o.CapacityType == ct || ct == karpv1.CapacityTypeReserved && o.CapacityType == karpv1.CapacityTypeOnDemand) {
			return ""
		}
	}
	return fmt.Sprintf("instance type %s has no %s offering in %s any more", name, ct, zone)
}

// Drift replaces drifted nodes, oldest drift first, within each pool's
// budget for Drifted: every empty one goes at once; otherwise the first
// whose pods all find a place (on the other nodes and on new NodeClaims
// from the pools, at any price) is replaced by those NodeClaims. It is
// eventual: with a terminationGracePeriod on the pool, pods with
// do-not-disrupt or a PDB do not hold the node.
func Drift(cands []Candidate, cluster []sched.Node, pools []sched.NodePool, base sched.Input, now time.Time) (Decision, error) {
	d := Decision{Command: Command{Reason: karpv1.DisruptionReasonDrifted}, Stays: map[string]string{}}
	members, disrupting := PoolCounts(cands)
	var drifted []Candidate
	for _, c := range cands {
		if Disrupting(c) {
			continue
		}
		if !meta.IsStatusConditionTrue(c.NodeClaim.Status.Conditions, karpv1.ConditionTypeDrifted) {
			continue
		}
		if why := blockedNode(c); why != "" {
			d.Stays[c.Name()] = why
			continue
		}
		if why := blockedPods(c, now); why != "" && !eventual(c) {
			d.Stays[c.Name()] = why
			continue
		}
		if c.PoolStarting && !Empty(c) {
			d.Stays[c.Name()] = fmt.Sprintf("drifted, but NodePool %s has NodeClaims starting: replacement waits for them", c.NodePool.Name)
			continue
		}
		drifted = append(drifted, c)
	}
	d.Eligible = len(drifted)
	if len(drifted) == 0 {
		return d, nil
	}
	driftedAt := func(c Candidate) time.Time {
		return meta.FindStatusCondition(c.NodeClaim.Status.Conditions, karpv1.ConditionTypeDrifted).LastTransitionTime.Time
	}
	slices.SortStableFunc(drifted, func(a, b Candidate) int {
		return cmp.Or(a.NodeClaim.CreationTimestamp.Compare(b.NodeClaim.CreationTimestamp.Time), cmp.Compare(a.Name(), b.Name()))
	})
	slices.SortStableFunc(drifted, func(a, b Candidate) int { return driftedAt(a).Compare(driftedAt(b)) })
	left, explain, err := budgetsLeft(drifted, karpv1.DisruptionReasonDrifted, members, disrupting, now)
	if err != nil {
		return Decision{}, err
	}
	spent := func(c Candidate) bool {
		if left[c.NodePool.Name] > 0 {
			return false
		}
		d.Stays[c.Name()] = fmt.Sprintf("drifted, but the disruption budget is spent: %s, %d disrupting", explain[c.NodePool.Name], disrupting[c.NodePool.Name])
		return true
	}
	for _, c := range drifted {
		if Empty(c) && !spent(c) {
			left[c.NodePool.Name]--
			d.Command.Candidates = append(d.Command.Candidates, c)
		}
	}
	if len(d.Command.Candidates) > 0 {
		return d, nil
	}
	for _, c := range drifted {
		if spent(c) {
			continue
		}
		in := base
		in.Pods, in.Nodes, in.NodePools = Reschedulable(c.Pods), others(cluster, nil, c), pools
		plan := sched.Solve(in)
		if len(plan.Unschedulable) > 0 {
			u := plan.Unschedulable[0]
			d.Stays[c.Name()] = fmt.Sprintf("drifted, but pod %s/%s would have no place: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
			continue
		}
		d.Command.Candidates, d.Command.Replacements = []Candidate{c}, plan.NodeClaims
		return d, nil
	}
	return d, nil
}

// eventual: the pool bounds a node's termination (terminationGracePeriod),
// so drift may start it even while pods would block a graceful drain.
func eventual(c Candidate) bool {
	return c.NodeClaim.Spec.TerminationGracePeriod != nil
}
