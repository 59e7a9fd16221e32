package simulator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
)

// schedule plays kube-scheduler once: pending pods are placed on the nodes
// that take pods now (Ready, not cordoned or deleting) by the solver's own
// predicates (resources, selectors and affinity, taints, topology spread),
// a pod's nominated node first, as kube-scheduler does; pods that fit
// nowhere are marked Unschedulable, which is what Nodewright watches for.
func (e *Engine) schedule(ctx context.Context) error {
	// The cluster model is current with every write (the engine feeds it
	// synchronously), and shares its objects read-only: no copies.
	inv := e.components.Cluster.Inventory()
	var pending []*corev1.Pod
	for _, p := range inv.Pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			if len(p.Spec.SchedulingGates) > 0 {
				// Not attempted while gated; kube-scheduler says so.
				if err := e.markGated(ctx, p); err != nil {
					return err
				}
				continue
			}
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	// kube-scheduler's queue order: oldest first.
	slices.SortStableFunc(pending, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	nodes := map[string]*sched.Node{}
	var order []string
	for _, v := range inv.Nodes {
		n := v.Node
		if !takesPods(n) {
			continue
		}
		nodes[n.Name] = &sched.Node{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable,
			Pods: slices.Clone(v.Pods), NodePool: n.Labels[karpv1.LabelNodePool], Initialized: true}
		order = append(order, n.Name)
	}
	slices.Sort(order)

	// A nomination to a node that no longer exists fails at once and
	// kube-scheduler drops it (Nodewright clears the ones it set when the
	// node goes, but not after a restart, or when its write failed).
	for _, p := range pending {
		if name := p.Status.NominatedNodeName; name != "" && !slices.ContainsFunc(inv.Nodes, func(v state.NodeView) bool { return v.Node.Name == name }) {
			if err := e.dropNomination(ctx, p); err != nil {
				return err
			}
		}
	}
	// A nominated pod holds its room; it is tried on its node first.
	nominated := map[string][]*corev1.Pod{}
	var rest []*corev1.Pod
	for _, p := range pending {
		if n := nodes[p.Status.NominatedNodeName]; n != nil {
			nominated[n.Name] = append(nominated[n.Name], p)
		} else {
			rest = append(rest, p)
		}
	}
	solve := func(pods []*corev1.Pod, on []sched.Node) sched.Plan {
		return sched.Solve(sched.Input{Pods: pods, Nodes: on, Namespaces: inv.Namespaces,
			PersistentVolumeClaims: inv.PersistentVolumeClaims, PersistentVolumes: inv.PersistentVolumes, StorageClasses: inv.StorageClasses})
	}
	var placements []sched.Placement
	for _, name := range order {
		pods := nominated[name]
		if len(pods) == 0 {
			continue
		}
		plan := solve(pods, []sched.Node{*nodes[name]})
		placements = append(placements, plan.Existing...)
		for _, pl := range plan.Existing {
			nodes[pl.Node].Pods = append(nodes[pl.Node].Pods, pl.Pods...)
		}
		for _, u := range plan.Unschedulable {
			rest = append(rest, u.Pod)
		}
	}
	var all []sched.Node
	for _, name := range order {
		all = append(all, *nodes[name])
	}
	plan := solve(rest, all)
	placements = append(placements, plan.Existing...)
	for _, pl := range placements {
		for _, p := range pl.Pods {
			if err := e.bind(ctx, p, pl.Node); err != nil {
				return err
			}
		}
	}
	for _, u := range plan.Unschedulable {
		if err := e.markUnschedulable(ctx, u.Pod, len(all), u.Reason); err != nil {
			return err
		}
	}
	return nil
}

// takesPods: Ready, schedulable, not going away.
func takesPods(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// bind assigns the pod to node, as the binding subresource does.
func (e *Engine) bind(ctx context.Context, p *corev1.Pod, node string) error {
	pod := p.DeepCopy()
	pod.Spec.NodeName = node
	if err := e.store.Update(ctx, pod); err != nil {
		return fmt.Errorf("emulated kube-scheduler: binding pod %s/%s to %s: %w", p.Namespace, p.Name, node, err)
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = ""
	setScheduled(pod, corev1.ConditionTrue, "", "", e.clock.Now())
	if err := e.store.Status().Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("emulated kube-scheduler: binding pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// dropNomination clears a pod's nominated node.
func (e *Engine) dropNomination(ctx context.Context, p *corev1.Pod) error {
	pod := p.DeepCopy()
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Status.NominatedNodeName = ""
	if err := e.store.Status().Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("emulated kube-scheduler: clearing the nominated node of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// markUnschedulable records the failed attempt on the pod, once: later
// attempts that fail the same way change nothing (kube-scheduler would back
// off), so the simulation does not spin.
func (e *Engine) markUnschedulable(ctx context.Context, p *corev1.Pod, nodes int, reason string) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return nil
		}
	}
	pod := p.DeepCopy()
	patch := client.MergeFrom(pod.DeepCopy())
	setScheduled(pod, corev1.ConditionFalse, corev1.PodReasonUnschedulable, fmt.Sprintf("0/%d nodes are available: %s", nodes, reason), e.clock.Now())
	if err := e.store.Status().Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("emulated kube-scheduler: marking pod %s/%s unschedulable: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// markGated sets PodScheduled False, SchedulingGated on a gated pod, once,
// as kube-scheduler does instead of attempting it.
func (e *Engine) markGated(ctx context.Context, p *corev1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			return nil
		}
	}
	pod := p.DeepCopy()
	patch := client.MergeFrom(pod.DeepCopy())
	setScheduled(pod, corev1.ConditionFalse, corev1.PodReasonSchedulingGated, "Scheduling is blocked due to non-empty scheduling gates", e.clock.Now())
	if err := e.store.Status().Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("emulated kube-scheduler: marking pod %s/%s gated: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func setScheduled(p *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)}
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			p.Status.Conditions[i] = cond
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
}
