package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NodeWork is what the kubelet owes a node at some instant.
type NodeWork struct {
	// Ready is the Ready condition to post (with phase Running), or nil
	// when the posted one is True and fresh.
	Ready *corev1.NodeCondition
	// Untaint are the indexes in spec.taints of the not-ready taints the
	// API server put on the node, ascending.
	Untaint []int
	// Registered: the registration delay has passed (the kubelet runs and
	// keeps its lease).
	Registered bool
	// Wait is when the node's status next needs the kubelet: the end of the
	// registration delay, or the next Ready heartbeat.
	Wait time.Duration
}

// NodeUpdate decides what the kubelet does to a node now, from the node as
// cached.
func NodeUpdate(node *corev1.Node, now time.Time, opts KubeletOptions) NodeWork {
	readyAt := node.CreationTimestamp.Add(opts.RegistrationDelay)
	if now.Before(readyAt) {
		return NodeWork{Wait: readyAt.Sub(now)}
	}
	interval := opts.statusInterval()
	w := NodeWork{Registered: true, Wait: interval}
	ready := findCondition(node.Status.Conditions, corev1.NodeReady)
	switch {
	case ready == nil || ready.Status != corev1.ConditionTrue:
		w.Ready = readyCondition(now, now)
	case now.Sub(ready.LastHeartbeatTime.Time) >= interval:
		since := ready.LastTransitionTime.Time
		if since.IsZero() {
			since = now
		}
		w.Ready = readyCondition(now, since)
	default:
		w.Wait = interval - now.Sub(ready.LastHeartbeatTime.Time)
	}
	for i, t := range node.Spec.Taints {
		if isNotReadyTaint(t) {
			w.Untaint = append(w.Untaint, i)
		}
	}
	return w
}

// statusInterval is how often a Ready node's heartbeat is re-posted.
func (o KubeletOptions) statusInterval() time.Duration {
	if o.StatusInterval > 0 {
		return max(o.StatusInterval, o.HeartbeatInterval)
	}
	return max(DefaultKubeletOptions.StatusInterval, o.HeartbeatInterval)
}

func readyCondition(heartbeat, transition time.Time) *corev1.NodeCondition {
	return &corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kwok kubelet is posting ready status",
		LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(transition),
	}
}

func isNotReadyTaint(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }

func findCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func (k *Kubelet) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := k.kube.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			k.leases.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := k.clock.Now()
	opts := k.opts
	if k.leases.isForbidden() {
		opts.StatusInterval = opts.HeartbeatInterval // the status is the only heartbeat
	}
	work := NodeUpdate(node, now, opts)
	if work.Ready != nil {
		if err := k.postReady(ctx, node, *work.Ready); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(work.Untaint) > 0 {
		if err := k.untaint(ctx, node, work.Untaint); err != nil {
			return reconcile.Result{}, err
		}
	}
	wait := work.Wait
	if work.Registered {
		next, err := k.renewLease(ctx, node, now)
		if err != nil {
			return reconcile.Result{}, err
		}
		wait = min(wait, next)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// postReady posts the Ready condition by a strategic merge patch of the
// status: conditions merge by type, so the patch carries only the
// condition the kubelet owns and cannot clobber the others (or conflict:
// it names no resource version).
func (k *Kubelet) postReady(ctx context.Context, node *corev1.Node, ready corev1.NodeCondition) error {
	data, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": corev1.NodeRunning, "conditions": []corev1.NodeCondition{ready},
	}})
	if err != nil {
		return fmt.Errorf("encoding the ready status of node %s: %w", node.Name, err)
	}
	if err := k.kube.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("reporting node %s ready: %w", node.Name, err)
	}
	return nil
}

// untaint removes the not-ready taints at the given indexes of the cached
// node's taints.
//
// spec.taints is an atomic list: a merge (or strategic merge) patch
// replaces it whole, so a plain one would drop a taint someone added since
// the cache was filled, and one guarded by the resource version conflicts
// with every write to the node (heartbeats, labels, Nodewright's
// registration) and must be retried under load. A JSON patch that, for
// each taint it removes (last first, so earlier indexes hold), first tests
// that the taint at that index still has the not-ready key touches only
// those entries: taints appended concurrently survive, and it fails (422,
// retried on a fresh read through the controller's backoff) only when the
// list was reordered under it.
func (k *Kubelet) untaint(ctx context.Context, node *corev1.Node, indexes []int) error {
	data, err := json.Marshal(untaintOps(indexes))
	if err != nil {
		return fmt.Errorf("encoding the taint removal of node %s: %w", node.Name, err)
	}
	if err := k.kube.Patch(ctx, node, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("removing not-ready taints of node %s: %w", node.Name, err)
	}
	return nil
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// untaintOps tests and removes the taints at indexes (ascending), last
// first.
func untaintOps(indexes []int) []jsonPatchOp {
	ops := make([]jsonPatchOp, 0, 2*len(indexes))
	for i := len(indexes) - 1; i >= 0; i-- {
		path := fmt.Sprintf("/spec/taints/%d", indexes[i])
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: path + "/key", Value: corev1.TaintNodeNotReady},
			jsonPatchOp{Op: "remove", Path: path})
	}
	return ops
}
