package nodeclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Field indexes the controller looks objects up by.
const (
	NodeProviderIDIndex      = "spec.providerID"
	NodeClaimProviderIDIndex = "status.providerID"
)

// Event reasons, as Karpenter's.
const (
	ReasonInsufficientCapacity = "InsufficientCapacityError"
	ReasonNodeClassNotReady    = "NodeClassNotReady"
	ReasonLivenessExpired      = "Liveness"
)

// Controller is the NodeClaim lifecycle reconciler.
type Controller struct {
	kube        client.Client
	provider    cloudprovider.CloudProvider
	clock       clock.Clock
	unavailable *state.UnavailableOfferings
	recorder    record.EventRecorder
	metrics     *metrics.Metrics
	hinter      Hinter
	// reader reads again after a write conflict (nil: through kube).
	reader client.Reader
}

// Hinter learns which node a NodeClaim registered as, before the node is
// made schedulable (see internal/controller/nomination).
type Hinter interface {
	Hint(ctx context.Context, claim, node string) error
}

// WithHinter has registration tell h about each node before lifting its
// unregistered taint.
func (c *Controller) WithHinter(h Hinter) *Controller {
	c.hinter = h
	return c
}

// WithAPIReader has writes that conflict read the object again through r
// (the manager's APIReader) rather than through the client's cache, which
// usually still answers the version that conflicted.
func (c *Controller) WithAPIReader(r client.Reader) *Controller {
	c.reader = r
	return c
}

// New wires the controller.
func New(kube client.Client, provider cloudprovider.CloudProvider, clk clock.Clock, unavailable *state.UnavailableOfferings, recorder record.EventRecorder, m *metrics.Metrics) *Controller {
	return &Controller{kube: kube, provider: provider, clock: clk, unavailable: unavailable, recorder: recorder, metrics: m}
}

// IndexFields registers the provider-ID indexes on Nodes and NodeClaims.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Node{}, NodeProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Node).Spec.ProviderID}
	}); err != nil {
		return fmt.Errorf("indexing nodes by provider ID: %w", err)
	}
	if err := indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
	}); err != nil {
		return fmt.Errorf("indexing nodeclaims by provider ID: %w", err)
	}
	return nil
}

// Controllers declares the reconciler, woken by NodeClaims and by the
// Nodes that register for them.
func (c *Controller) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "nodeclaim.lifecycle", Reconciler: c, Sources: []watch.Source{
		watch.For(&karpv1.NodeClaim{}, nil),
		watch.Mapped(&corev1.Node{}, c.claimsOfNode),
	}}}
}

func (c *Controller) claimsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{NodeClaimProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, nc := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nc)})
	}
	return out
}

// Reconcile moves one NodeClaim along its lifecycle. A write that
// conflicts is retried on a fresh copy; one that still conflicts (the
// cache is behind) requeues the claim without an error.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req)
	if fieldpatch.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("write conflict, requeueing", "NodeClaim", req.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: fieldpatch.ConflictRequeue}, nil
	}
	return res, err
}

func (c *Controller) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil || !cloudprovider.Manages(c.provider, nc.Spec.NodeClassRef) {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		// The finalizers list goes whole: fieldpatch locks it.
		if _, err := fieldpatch.Object(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) {
			controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
		}); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the termination finalizer to nodeclaim %s: %w", nc.Name, err)
		}
	}
	if why := Expired(nc, c.clock.Now()); why != "" {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonLivenessExpired, "Deleting nodeclaim: %s", why)
		reason := metrics.ReasonRegistrationTimeout
		if !isTrue(nc, karpv1.ConditionTypeLaunched) {
			reason = metrics.ReasonLaunchTimeout
		}
		return reconcile.Result{}, c.delete(ctx, nc, reason)
	}
	// base is the claim as the API last answered it: the status this pass
	// changes is written as its difference from base.
	base := nc.DeepCopy()
	if !isTrue(nc, karpv1.ConditionTypeLaunched) {
		launched, done, err := c.launch(ctx, nc)
		if done {
			return reconcile.Result{}, err
		}
		if err != nil {
			c.setCondition(nc, karpv1.ConditionTypeLaunched, false, "LaunchFailed", truncate(err.Error(), 300))
			if _, serr := c.writeStatus(ctx, base, nc); serr != nil {
				return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w (and recording it: %v)", nc.Name, err, serr)
			}
			return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
		}
		base = nc.DeepCopy() // labelled: a newer version
		nc.Status.ProviderID = launched.Status.ProviderID
		nc.Status.ImageID = launched.Status.ImageID
		nc.Status.Capacity = launched.Status.Capacity
		nc.Status.Allocatable = launched.Status.Allocatable
		c.setCondition(nc, karpv1.ConditionTypeLaunched, true, "", "")
	}
	var node *corev1.Node
	if isTrue(nc, karpv1.ConditionTypeLaunched) {
		var err error
		if node, err = c.register(ctx, nc); err != nil {
			return reconcile.Result{}, err
		}
	}
	if node != nil && !isTrue(nc, karpv1.ConditionTypeInitialized) {
		if err := c.initialize(ctx, nc, node); err != nil {
			return reconcile.Result{}, err
		}
	}
	ready := isTrue(nc, karpv1.ConditionTypeLaunched) && isTrue(nc, karpv1.ConditionTypeRegistered) && isTrue(nc, karpv1.ConditionTypeInitialized)
	c.setCondition(nc, karpv1.ConditionTypeReady, ready, "NotReady", "the node has not launched, registered and initialized yet")
	registered, err := c.writeStatus(ctx, base, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Counted once the registration is recorded (a conflict that persists
	// retries the registration), and once per NodeClaim: only the write
	// that sets the node name counts it.
	if registered && node != nil {
		c.metrics.NodeRegistered(node)
	}
	if !ready {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil // liveness, and nodes that change silently
	}
	return reconcile.Result{}, nil
}

// ownedConditions are the NodeClaim conditions this controller writes.
var ownedConditions = []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady}

// writeStatus writes what this pass changed in the claim's status, from
// base (as read) to want: the provider ID, image, capacity and
// allocatable a launch sets, the node name registration sets, and the
// lifecycle conditions. A concurrent writer's conditions (disruption's,
// termination's) survive: the patch carries the conditions list, so it is
// locked to base's version, and a conflict applies the same change to a
// fresh copy. Nothing is written when nothing changed. registered says
// the write set the node name (on the copy it was made on, which a stale
// base may not show).
func (c *Controller) writeStatus(ctx context.Context, base, want *karpv1.NodeClaim) (registered bool, err error) {
	if equality.Semantic.DeepEqual(base.Status, want.Status) {
		return false, nil
	}
	was := base.Status
	obj := base.DeepCopy()
	written, err := fieldpatch.Status(ctx, c.kube, c.reader, obj, func(nc *karpv1.NodeClaim) {
		st := &nc.Status
		registered = st.NodeName == "" && want.Status.NodeName != ""
		if want.Status.ProviderID != was.ProviderID {
			st.ProviderID = want.Status.ProviderID
		}
		if want.Status.ImageID != was.ImageID {
			st.ImageID = want.Status.ImageID
		}
		if want.Status.NodeName != was.NodeName {
			st.NodeName = want.Status.NodeName
		}
		if !equality.Semantic.DeepEqual(want.Status.Capacity, was.Capacity) {
			st.Capacity = want.Status.Capacity.DeepCopy()
		}
		if !equality.Semantic.DeepEqual(want.Status.Allocatable, was.Allocatable) {
			st.Allocatable = want.Status.Allocatable.DeepCopy()
		}
		fieldpatch.OwnedConditions(&st.Conditions, was.Conditions, want.Status.Conditions, ownedConditions...)
	})
	if err != nil {
		return false, fmt.Errorf("updating nodeclaim %s status: %w", want.Name, err)
	}
	return written && registered, nil
}

// launch creates the instance and labels the claim as the provider
// answers; done means the NodeClaim was deleted.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (launched *karpv1.NodeClaim, done bool, err error) {
	launched, err = c.provider.Create(ctx, nc)
	switch {
	case cloudprovider.IsInsufficientCapacityError(err):
		for _, o := range cloudprovider.RefusedOfferings(err) {
			c.unavailable.MarkUnavailable(o.InstanceType, o.Zone, o.CapacityType)
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonInsufficientCapacity, "NodeClaim %s event: %s", nc.Name, err)
		return nil, true, c.delete(ctx, nc, metrics.ReasonInsufficientCapacity)
	case cloudprovider.IsNodeClassNotReadyError(err):
		c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonNodeClassNotReady, "NodeClaim %s event: %s", nc.Name, err)
		return nil, true, c.delete(ctx, nc, metrics.ReasonNodeClassNotReady)
	case err != nil:
		return nil, false, err
	}
	// The provider's labels and annotations (e.g. the NodeClass hash it
	// launched from): maps, merged key by key, never conflicting.
	if _, err := fieldpatch.Object(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) {
		for k, v := range launched.Labels {
			if nc.Labels == nil {
				nc.Labels = map[string]string{}
			}
			nc.Labels[k] = v
		}
		for k, v := range launched.Annotations {
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[k] = v
		}
	}); err != nil {
		return nil, false, fmt.Errorf("labelling launched nodeclaim %s: %w", nc.Name, err)
	}
	return launched, false, nil
}

// register finds the node and, the first time, syncs it; it returns the
// node once registered.
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingFields{NodeProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil, fmt.Errorf("finding the node of nodeclaim %s: %w", nc.Name, err)
	}
	if isTrue(nc, karpv1.ConditionTypeRegistered) {
		// Registered stays registered: a node missing from the cache for a
		// moment (or gone: garbage collection's business) does not undo it.
		if len(nodes.Items) == 1 {
			return &nodes.Items[0], nil
		}
		return nil, nil
	}
	switch len(nodes.Items) {
	case 0:
		c.setCondition(nc, karpv1.ConditionTypeRegistered, false, "NodeNotFound", "no node has registered with provider ID "+nc.Status.ProviderID)
		return nil, nil
	case 1:
	default:
		c.setCondition(nc, karpv1.ConditionTypeRegistered, false, "MultipleNodesFound", fmt.Sprintf("%d nodes have provider ID %s", len(nodes.Items), nc.Status.ProviderID))
		return nil, nil
	}
	node := &nodes.Items[0]
	if c.hinter != nil {
		// Before the node can take pods, so kube-scheduler places the
		// planned ones there first. A failed hint costs packing, not
		// correctness: registration goes on.
		if err := c.hinter.Hint(ctx, nc.Name, node.Name); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "nominating planned pods", "NodeClaim", nc.Name, "Node", node.Name)
		}
	}
	// Taints, owner references and finalizers are lists: the patch is
	// locked, so a taint another controller added or removed meanwhile
	// is not undone, and a conflict syncs the fresh node instead.
	node = node.DeepCopy()
	if _, err := fieldpatch.Object(ctx, c.kube, c.reader, node, func(n *corev1.Node) {
		*n = *SyncedNode(nc, n)
	}); err != nil {
		return nil, fmt.Errorf("registering node %s for nodeclaim %s: %w", node.Name, nc.Name, err)
	}
	nc.Status.NodeName = node.Name
	c.setCondition(nc, karpv1.ConditionTypeRegistered, true, "", "")
	return node, nil
}

// initialize marks the claim (and node) initialized once the node is ready.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	if reason, message := NotInitialized(nc, node); reason != "" {
		c.setCondition(nc, karpv1.ConditionTypeInitialized, false, reason, message)
		return nil
	}
	if node.Labels[karpv1.LabelNodeInitialized] != "true" {
		if _, err := fieldpatch.Object(ctx, c.kube, c.reader, node.DeepCopy(), func(n *corev1.Node) {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[karpv1.LabelNodeInitialized] = "true"
		}); err != nil {
			return fmt.Errorf("marking node %s initialized: %w", node.Name, err)
		}
	}
	c.setCondition(nc, karpv1.ConditionTypeInitialized, true, "", "")
	return nil
}

// setCondition sets a condition True, or Unknown with a reason and message.
func (c *Controller) setCondition(nc *karpv1.NodeClaim, t string, ok bool, reason, message string) {
	cond := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: nc.Generation}
	if !ok {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, reason, message
	}
	if existing := meta.FindStatusCondition(nc.Status.Conditions, t); existing != nil && existing.Status == cond.Status {
		cond.LastTransitionTime = existing.LastTransitionTime
	} else {
		cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
	}
	meta.SetStatusCondition(&nc.Status.Conditions, cond)
}

// delete deletes the claim, counted as disrupted for reason.
func (c *Controller) delete(ctx context.Context, nc *karpv1.NodeClaim, reason string) error {
	if err := c.kube.Delete(ctx, nc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
		}
		return nil
	}
	c.metrics.NodeClaimDisrupted(nc, reason)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
