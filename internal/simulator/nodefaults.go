package simulator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// podEvictionTimeout is how long kube-controller-manager's taint manager
// leaves pods on an unreachable node (the default toleration the
// DefaultTolerationSeconds admission plugin gives every pod).
const podEvictionTimeout = 5 * time.Minute

// faultNodes are the nodes a node fault may hit: Nodewright's (they carry
// a NodePool label), not being deleted, Ready, with a running kubelet;
// capacityType, when set, narrows them.
func (e *Engine) faultNodes(ctx context.Context, capacityType string) ([]*corev1.Node, error) {
	var list corev1.NodeList
	if err := e.store.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []*corev1.Node
	for i := range list.Items {
		n := &list.Items[i]
		if n.Labels[karpv1.LabelNodePool] == "" || n.DeletionTimestamp != nil || !takesPods(n) || e.chaos.stopped[n.Name] ||
			capacityType != "" && n.Labels[karpv1.LabelCapacityType] != capacityType {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// pickNode draws one of the fault nodes, or nil when there is none.
func (e *Engine) pickNode(ctx context.Context, capacityType string) (*corev1.Node, error) {
	nodes, err := e.faultNodes(ctx, capacityType)
	if err != nil || len(nodes) == 0 {
		return nil, err
	}
	return nodes[e.chaos.in.events.IntN(len(nodes))], nil
}

// nodeNotReady stops the kubelet of a random node: no more heartbeats or
// pod updates. The node lifecycle controller then reports it Ready=Unknown
// and taints it unreachable, and the taint manager deletes its pods
// podEvictionTimeout later.
func (e *Engine) nodeNotReady(ctx context.Context) error {
	n, err := e.pickNode(ctx, "")
	if err != nil || n == nil {
		return err
	}
	e.chaos.in.counts[FaultNodeNotReady]++
	e.report.fault(FaultNodeNotReady, n.Name, "kubelet stopped: Ready=Unknown, tainted unreachable")
	if err := e.stopKubelet(ctx, n); err != nil {
		return err
	}
	now := metav1.NewTime(e.clock.Now())
	n.Spec.Taints = append(n.Spec.Taints,
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
	if err := e.store.Update(ctx, n); err != nil {
		return fmt.Errorf("node %s: tainting it unreachable: %w", n.Name, err)
	}
	name, uid := n.Name, n.UID
	e.timers.add(e.clock.Now().Add(podEvictionTimeout), nil, func() error { return e.evictUnreachable(context.Background(), name, uid) })
	return nil
}

// stopKubelet stops the kubelet of node n: the node lifecycle controller
// reports the node Ready=Unknown and its pods not ready.
func (e *Engine) stopKubelet(ctx context.Context, n *corev1.Node) error {
	e.chaos.stopped[n.Name] = true
	now := metav1.NewTime(e.clock.Now())
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", now
		}
	}
	if err := e.store.Status().Update(ctx, n); err != nil {
		return fmt.Errorf("node %s: reporting it not ready: %w", n.Name, err)
	}
	return e.podsNotReady(ctx, n.Name)
}

// podsNotReady marks the pods of a node whose kubelet stopped not ready,
// as the node lifecycle controller does: they stop counting as healthy
// for their PodDisruptionBudgets.
func (e *Engine) podsNotReady(ctx context.Context, node string) error {
	var pods corev1.PodList
	if err := e.store.List(ctx, &pods); err != nil {
		return err
	}
	now := metav1.NewTime(e.clock.Now())
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil {
			continue
		}
		changed := false
		for j := range p.Status.Conditions {
			if c := &p.Status.Conditions[j]; c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				c.Status, c.Reason, c.LastTransitionTime, changed = corev1.ConditionFalse, "NodeNotReady", now, true
			}
		}
		if !changed {
			continue
		}
		if err := e.store.Status().Update(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("marking pod %s/%s of node %s not ready: %w", p.Namespace, p.Name, node, err)
		}
	}
	return nil
}

// evictUnreachable deletes the pods of a node still unreachable, as the
// taint manager does once their toleration runs out.
func (e *Engine) evictUnreachable(ctx context.Context, name string, uid types.UID) error {
	n := &corev1.Node{}
	if err := e.store.Get(ctx, client.ObjectKey{Name: name}, n); err != nil || n.UID != uid || !e.chaos.stopped[name] {
		return client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := e.store.List(ctx, &pods); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != name || p.DeletionTimestamp != nil {
			continue
		}
		if err := e.store.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s of unreachable node %s: %w", p.Namespace, p.Name, name, err)
		}
	}
	return nil
}

// instanceVanished takes a random node's instance away without Nodewright
// asking: with kwok the Node is the instance and is deleted; with aws the
// fake's instance is terminated and the cloud node lifecycle controller
// (the fake's machines) deletes its Node. Its kubelet is gone too.
func (e *Engine) instanceVanished(ctx context.Context) error {
	n, err := e.pickNode(ctx, "")
	if err != nil || n == nil {
		return err
	}
	e.chaos.in.counts[FaultInstanceVanished]++
	e.report.fault(FaultInstanceVanished, n.Name, "instance "+n.Spec.ProviderID+" gone")
	e.inv.cloudTook[n.Spec.ProviderID] = true
	// Its kubelet went with it: the node and its pods are not ready.
	if err := e.stopKubelet(ctx, n); err != nil {
		return err
	}
	if e.aws != nil {
		id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
		if err := e.aws.SetInstanceState(id, "terminated"); err != nil {
			return fmt.Errorf("node %s: terminating its instance: %w", n.Name, err)
		}
		return nil
	}
	if err := e.store.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("node %s: deleting it: %w", n.Name, err)
	}
	return nil
}

// randomInterruption reclaims a random spot node, as an interrupt step.
func (e *Engine) randomInterruption(ctx context.Context) error {
	n, err := e.pickNode(ctx, karpv1.CapacityTypeSpot)
	if err != nil || n == nil {
		return err
	}
	e.chaos.in.counts[FaultSpotInterruption]++
	e.report.fault(FaultSpotInterruption, n.Name, "spot instance reclaimed")
	return e.interrupt(ctx, []*corev1.Node{n})
}

// storedPod is the stored pod itself (not a copy), or nil.
func (s *store) storedPod(key types.NamespacedName) *corev1.Pod {
	p, _ := s.objects[corev1.SchemeGroupVersion.WithKind("Pod")][key].(*corev1.Pod)
	return p
}
