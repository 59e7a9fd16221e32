package nomination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/internal/state"
)

// PodNominatedNodeIndex indexes pods by status.nominatedNodeName.
const PodNominatedNodeIndex = "status.nominatedNodeName"

// Controller sets and clears the hints.
type Controller struct {
	kube    client.Client
	cluster *state.Cluster
	log     logr.Logger
	// workers: how many pods one Hint patches at once (0 or 1: one after
	// another).
	workers int

	mu sync.Mutex
	// hinted: the pods this controller nominated, to their NodeClaim and
	// node, so the hint can be withdrawn when the plan no longer holds.
	hinted map[types.NamespacedName]hint
}

type hint struct{ claim, node string }

// recheck is how often a NodeClaim with hinted pods is looked at again, so
// hints whose nomination lapsed are withdrawn promptly.
const recheck = 2 * time.Second

// New wires the controller to the cluster model holding the nominations;
// workers bounds the pod patches one Hint sends at once.
func New(kube client.Client, cluster *state.Cluster, workers int, log logr.Logger) *Controller {
	return &Controller{kube: kube, cluster: cluster, log: log, workers: workers, hinted: map[types.NamespacedName]hint{}}
}

// IndexFields registers the pod index the controller clears hints by.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, PodNominatedNodeIndex, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Status.NominatedNodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by nominated node: %w", err)
	}
	return nil
}

// Controllers declares the reconciler, keyed by NodeClaim and woken by
// NodeClaims and by the pods planned onto them (a pod whose hint
// kube-scheduler cleared).
func (c *Controller) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "nodeclaim.nomination", Reconciler: c, Sources: []watch.Source{
		watch.For(&karpv1.NodeClaim{}, nil),
		watch.Mapped(&corev1.Pod{}, func(_ context.Context, o client.Object) []reconcile.Request {
			if target := c.cluster.NominationOf(o.GetNamespace(), o.GetName()); target != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: target}}}
			}
			return nil
		}),
	}}}
}

// Reconcile hints the pods planned onto a starting NodeClaim's node, or
// clears the hints on a deleted NodeClaim's node.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		c.forgetClaim(nc.Name)
		return reconcile.Result{}, c.clear(ctx, nc.Status.NodeName)
	}
	if nc.Status.NodeName == "" {
		return reconcile.Result{}, nil
	}
	if err := c.withdraw(ctx, nc.Name); err != nil {
		return reconcile.Result{}, err
	}
	if err := c.Hint(ctx, nc.Name, nc.Status.NodeName); err != nil {
		return reconcile.Result{}, err
	}
	if c.hints(nc.Name) > 0 {
		return reconcile.Result{RequeueAfter: recheck}, nil
	}
	return reconcile.Result{}, nil
}

// withdraw clears the hints of claim's pods whose nomination lapsed (or
// moved): kube-scheduler may leave a pod with a stale nomination for
// minutes, and a nominated pod is not provisionable, so it would wait for
// nothing. Bound and deleted pods are forgotten.
func (c *Controller) withdraw(ctx context.Context, claim string) error {
	c.mu.Lock()
	var mine []types.NamespacedName
	for key, h := range c.hinted {
		if h.claim == claim {
			mine = append(mine, key)
		}
	}
	c.mu.Unlock()
	// Map order is random: patch in a fixed order so a run (and the
	// simulator's seeded faults on it) replays the same way.
	slices.SortFunc(mine, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var errs []error
	for _, key := range mine {
		if c.cluster.NominationOf(key.Namespace, key.Name) == claim {
			continue
		}
		c.mu.Lock()
		h := c.hinted[key]
		delete(c.hinted, key)
		c.mu.Unlock()
		p := &corev1.Pod{}
		if err := c.kube.Get(ctx, key, p); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		if staleHint(p, h.node) {
			errs = append(errs, c.setNominatedNode(ctx, p, ""))
		}
	}
	return errors.Join(errs...)
}

// hints counts claim's hinted pods.
func (c *Controller) hints(claim string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.hinted {
		if h.claim == claim {
			n++
		}
	}
	return n
}

// Hint sets status.nominatedNodeName to node on the pending pods planned
// onto claim, up to the controller's workers at once (a node planned for a hundred pods
// is not held back a hundred round trips). The NodeClaim lifecycle
// controller calls it when the node registers, before lifting the
// unregistered taint.
func (c *Controller) Hint(ctx context.Context, claim, node string) error {
	keys := c.cluster.NominatedTo(claim)
	errs := make([]error, len(keys))
	workqueue.ParallelizeUntil(ctx, max(1, c.workers), len(keys), func(i int) {
		errs[i] = c.hintOne(ctx, keys[i], claim, node)
	})
	return errors.Join(errs...)
}

func (c *Controller) hintOne(ctx context.Context, key types.NamespacedName, claim, node string) error {
	p := &corev1.Pod{}
	if err := c.kube.Get(ctx, key, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Spec.NodeName != "" {
		c.forget(key)
		return nil
	}
	if !wantsHint(p, node) {
		return nil
	}
	if err := c.setNominatedNode(ctx, p, node); err != nil {
		return err
	}
	c.mu.Lock()
	c.hinted[key] = hint{claim: claim, node: node}
	c.mu.Unlock()
	return nil
}

func (c *Controller) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.hinted, key)
}

func (c *Controller) forgetClaim(claim string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, h := range c.hinted {
		if h.claim == claim {
			delete(c.hinted, key)
		}
	}
}

// clear removes the hints pointing at a node that is going away.
func (c *Controller) clear(ctx context.Context, node string) error {
	if node == "" {
		return nil
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{PodNominatedNodeIndex: node}); err != nil {
		return fmt.Errorf("listing pods nominated to node %s: %w", node, err)
	}
	var errs []error
	for i := range pods.Items {
		if staleHint(&pods.Items[i], node) {
			errs = append(errs, c.setNominatedNode(ctx, &pods.Items[i], ""))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) setNominatedNode(ctx context.Context, p *corev1.Pod, node string) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status.NominatedNodeName = node
	if err := c.kube.Status().Patch(ctx, p, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // the pod changed: its update event brings us back
		}
		return fmt.Errorf("setting the nominated node of pod %s/%s to %q: %w", p.Namespace, p.Name, node, err)
	}
	c.log.V(1).Info("nominated node", "Pod", client.ObjectKeyFromObject(p), "Node", node)
	return nil
}
