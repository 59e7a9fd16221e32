package simulator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/disruption"
)

// admitEviction serves the eviction API (evictionAllowed: the
// PodDisruptionBudgets) and tells the checker that the pod's removal that
// follows is an eviction.
func (e *Engine) admitEviction(ctx context.Context, obj client.Object) error {
	if err := e.evictionAllowed(ctx, obj); err != nil {
		return err
	}
	e.inv.admitted = types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	return nil
}

// podRemoved checks a pod's removal (deleted, or given a deletion
// timestamp). Karpenter's rule: its drain never evicts a pod whose
// karpenter.sh/do-not-disrupt holds, on any path (expiration and
// interruption included: it waits for such pods), and evicts through the
// Eviction API, which keeps PodDisruptionBudgets; only at the node's
// terminationGracePeriod deadline (less the pod's own grace period) does
// it delete pods regardless of both. So an eviction, or a deletion by a
// Nodewright controller before that deadline, must neither remove an
// active do-not-disrupt pod nor leave a budget selecting a healthy pod
// with fewer healthy pods than it keeps. Workloads scaling down, users and
// the kubelet are not Nodewright and are not checked.
func (c *checker) podRemoved(p *corev1.Pod, key string) {
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	evicted := c.admitted == k
	c.admitted = types.NamespacedName{}
	how := "evicted"
	if !evicted {
		how = "deleted by " + c.actorName()
	}
	if _, tracked := c.history[key]; tracked || evicted || nodewrightActor(c.e.actor) {
		c.note(key, "%s", how)
	}
	if !evicted && !nodewrightActor(c.e.actor) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	now := c.now()
	if !evicted && c.forcedAtDeadline(p, now) {
		return
	}
	objects := []string{key}
	node := p.Spec.NodeName
	if node != "" {
		objects = append(objects, "node/"+node)
		if n := c.nodes[node]; n != nil {
			if claim, _ := c.claimOfNode(node, n); claim != "" {
				objects = append(objects, "nodeclaim/"+claim)
			}
		}
	}
	if disruption.DoNotDisrupt(p, now) {
		c.record(InvariantEvictions, key+"/do-not-disrupt", objects, "pod %s/%s with %s=%s was %s from node %s before its node's termination grace period ended",
			p.Namespace, p.Name, karpv1.AnnotationDoNotDisrupt, p.Annotations[karpv1.AnnotationDoNotDisrupt], how, node)
	}
	was := p.DeepCopy()
	was.DeletionTimestamp = nil
	if !healthy(was) {
		return // an unhealthy pod does not count against a budget
	}
	ctx := context.Background()
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.e.store.List(ctx, &pdbs, client.InNamespace(p.Namespace)); err != nil {
		return
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		up, desired, err := c.e.pdbHealth(ctx, pdb, selector)
		if err != nil || up >= desired {
			continue
		}
		c.record(InvariantEvictions, key+"/pdb/"+pdb.Name, append(objects, "poddisruptionbudget/"+p.Namespace+"/"+pdb.Name),
			"pod %s/%s was %s from node %s, leaving poddisruptionbudget %s with %d healthy pods where it keeps %d",
			p.Namespace, p.Name, how, node, pdb.Name, up, desired)
	}
}

// forcedAtDeadline: the pod's node's NodeClaim has a termination deadline
// and now is past it less the pod's termination grace period (when
// Karpenter deletes pods regardless of PDBs and do-not-disrupt).
func (c *checker) forcedAtDeadline(p *corev1.Pod, now time.Time) bool {
	n := c.nodes[p.Spec.NodeName]
	if n == nil {
		return false
	}
	_, s := c.claimOfNode(p.Spec.NodeName, n)
	if s == nil || s.deadline == nil {
		return false
	}
	grace := 30 * time.Second // the API's default terminationGracePeriodSeconds
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	return !now.Before(s.deadline.Add(-grace))
}

// checkPending: a pod pending longer than PendingBound is a violation
// (one per owner) unless the provisioner's solver finds no place for it
// now: a pod no NodePool can take (no type fits, limits reached, capacity
// out) is not. A pod the solver places, or that a nomination holds for a
// node or NodeClaim on its way, has been provisioned for that long without
// being bound. Pods held back by scheduling gates are not Nodewright's.
func (c *checker) checkPending(ctx context.Context, now time.Time) {
	var overdue []types.NamespacedName
	for k, created := range c.pending {
		if now.Sub(created) > PendingBound {
			overdue = append(overdue, k)
		}
	}
	if len(overdue) == 0 {
		return
	}
	plan, err := c.e.components.Provisioner.Plan(ctx)
	if err != nil {
		return
	}
	where := map[types.NamespacedName]string{}
	for _, u := range plan.Unschedulable {
		where[client.ObjectKeyFromObject(u.Pod)] = ""
	}
	for _, nc := range plan.NodeClaims {
		for _, p := range nc.Pods {
			where[client.ObjectKeyFromObject(p)] = fmt.Sprintf("the solver places it on a new %s of nodepool %s", nc.InstanceType, nc.NodePool)
		}
	}
	for _, ex := range plan.Existing {
		for _, p := range ex.Pods {
			where[client.ObjectKeyFromObject(p)] = "the solver places it on " + ex.Node
		}
	}
	excused := map[types.NamespacedName]bool{}
	for _, k := range overdue {
		if w, solved := where[k]; solved && w == "" {
			excused[k] = true
		}
	}
	unready := c.unreadyPoolsTake(ctx, excused)
	byOwner := map[string][]*corev1.Pod{}
	why := map[types.NamespacedName]string{}
	pools := map[types.NamespacedName]string{}
	for _, k := range overdue {
		w, solved := where[k]
		if u, ok := unready[k]; ok {
			w, solved, pools[k] = u[0], true, u[1]
		} else if excused[k] {
			continue // no NodePool can take it now
		}
		p := &corev1.Pod{}
		if err := c.e.store.Get(ctx, k, p); err != nil || len(p.Spec.SchedulingGates) > 0 {
			continue
		}
		switch {
		case p.Status.NominatedNodeName != "":
			w = "it is nominated to node " + p.Status.NominatedNodeName
		case !solved:
			w = "it is planned onto a NodeClaim on its way"
		}
		owner := p.Namespace + "/" + p.Name
		if ref := metav1.GetControllerOf(p); ref != nil {
			owner = p.Namespace + "/" + strings.ToLower(ref.Kind) + "/" + ref.Name
		}
		byOwner[owner] = append(byOwner[owner], p)
		why[k] = w
	}
	for _, owner := range slices.Sorted(maps.Keys(byOwner)) {
		pods := byOwner[owner]
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		objects := make([]string, 0, min(len(pods), 5)+2)
		for _, p := range pods[:min(len(pods), 5)] {
			objects = append(objects, podKey(p.Namespace, p.Name))
		}
		if n := pods[0].Status.NominatedNodeName; n != "" {
			objects = append(objects, "node/"+n)
			if node := c.nodes[n]; node != nil {
				if claim, _ := c.claimOfNode(n, node); claim != "" {
					objects = append(objects, "nodeclaim/"+claim)
				}
			}
		}
		first := client.ObjectKeyFromObject(pods[0])
		if pool := pools[first]; pool != "" {
			objects = append(objects, "nodepool/"+pool)
		}
		c.record(InvariantPodsBound, owner, objects, "%d pod(s) of %s pending longer than %s, %s since %s: %s",
			len(pods), owner, PendingBound, first.Name, c.offset(c.pending[first]), why[first])
	}
}
