package termination

import (
	"context"
	"errors"
	"fmt"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// PodNodeNameIndex finds a node's pods.
const PodNodeNameIndex = "spec.nodeName"

// Event reasons and labels, as Karpenter's.
const (
	ReasonFailedDraining = "FailedDraining"
	ReasonDisrupted      = "Disrupted"
	labelExcludeFromLB   = "node.kubernetes.io/exclude-from-external-load-balancers"
)

// Controller terminates NodeClaims and Nodes.
type Controller struct {
	kube     client.Client
	provider cloudprovider.CloudProvider
	clock    clock.Clock
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	// reader re-reads an object after an optimistic-lock conflict (nil:
	// kube); see PatchLockedReading.
	reader client.Reader
}

// New wires the controller.
func New(kube client.Client, provider cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder, m *metrics.Metrics) *Controller {
	return &Controller{kube: kube, provider: provider, clock: clk, recorder: recorder, metrics: m}
}

// WithAPIReader has conflict retries re-read through r (the manager's
// uncached APIReader) rather than the cache that served the stale copy.
func (c *Controller) WithAPIReader(r client.Reader) *Controller {
	c.reader = r
	return c
}

// IndexFields registers the pod index by node name.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, PodNodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
}

// Controllers declares the Node and the NodeClaim termination reconcilers.
func (c *Controller) Controllers() []watch.Controller {
	return []watch.Controller{
		{Name: "node.termination", Reconciler: reconcile.Func(c.reconcileNode), Sources: []watch.Source{watch.For(&corev1.Node{}, nil)}},
		{Name: "nodeclaim.termination", Reconciler: reconcile.Func(c.reconcileNodeClaim), Sources: []watch.Source{
			watch.For(&karpv1.NodeClaim{}, nil),
			watch.Mapped(&corev1.Node{}, c.claimsOfNode),
		}},
	}
}

func (c *Controller) claimsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	nc, err := c.claimOf(ctx, o.(*corev1.Node))
	if err != nil || nc == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(nc)}}
}

func (c *Controller) claimOf(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.NodeClaimProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return nil, fmt.Errorf("finding the nodeclaim of node %s: %w", node.Name, err)
	}
	if len(claims.Items) == 0 {
		return nil, nil
	}
	return &claims.Items[0], nil
}

func (c *Controller) nodeOf(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingFields{nodeclaim.NodeProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil, fmt.Errorf("finding the node of nodeclaim %s: %w", nc.Name, err)
	}
	if len(nodes.Items) == 0 {
		return nil, nil
	}
	return &nodes.Items[0], nil
}

// reconcileNodeClaim: stamp the deadline, take the node away, then the
// instance, then the finalizer.
func (c *Controller) reconcileNodeClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && nc.Annotations[karpv1.AnnotationNodeClaimTerminationTime] == "" {
		patch := client.MergeFrom(nc.DeepCopy())
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[karpv1.AnnotationNodeClaimTerminationTime] = nc.DeletionTimestamp.Add(tgp.Duration).UTC().Format(time.RFC3339)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("stamping the termination deadline of nodeclaim %s: %w", nc.Name, err)
		}
	}
	node, err := c.nodeOf(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node != nil {
		if node.DeletionTimestamp == nil {
			if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting node %s of nodeclaim %s: %w", node.Name, nc.Name, err)
			}
		}
		return reconcile.Result{RequeueAfter: time.Second}, nil // the node's own termination drains it
	}
	if done, err := c.terminateInstance(ctx, nc); !done || err != nil {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, err
	}
	if err := PatchLockedReading(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) bool {
		return controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	}); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the finalizer of nodeclaim %s: %w", nc.Name, err))
	}
	c.metrics.NodeClaimTerminated(nc, c.clock.Now())
	return reconcile.Result{}, nil
}

// terminateInstance deletes the instance; done once the provider says it is
// gone.
func (c *Controller) terminateInstance(ctx context.Context, nc *karpv1.NodeClaim) (bool, error) {
	if nc.Status.ProviderID == "" {
		return true, nil // never launched
	}
	err := c.provider.Delete(ctx, nc)
	switch {
	case cloudprovider.IsNodeClaimNotFoundError(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
	}
	c.setCondition(ctx, nc, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, karpv1.ConditionTypeInstanceTerminating, "")
	return false, nil
}

// reconcileNode drains a deleting managed node, then releases it.
func (c *Controller) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	nc, err := c.claimOf(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc != nil && nc.DeletionTimestamp == nil {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %s of node %s: %w", nc.Name, node.Name, err)
		}
	}
	if !nodeReady(node) {
		// A node whose instance is already gone has nothing left to drain.
		if _, err := c.provider.Get(ctx, node.Spec.ProviderID); cloudprovider.IsNodeClaimNotFoundError(err) {
			return reconcile.Result{}, c.release(ctx, node, false)
		}
	}
	if err := c.cordon(ctx, node); err != nil {
		return reconcile.Result{}, err
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{PodNodeNameIndex: node.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	plan := PlanDrain(pointers(pods.Items), c.clock.Now(), deadlineOf(nc))
	for _, f := range plan.Delete {
		c.recorder.Eventf(f.Pod, corev1.EventTypeNormal, ReasonDisrupted, "Deleting pod: its node's termination grace period is ending")
		if err := c.kube.Delete(ctx, f.Pod, client.GracePeriodSeconds(int64(f.Grace.Seconds()))); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting pod %s/%s from node %s: %w", f.Pod.Namespace, f.Pod.Name, node.Name, err)
		}
		c.metrics.PodDrained(metrics.DrainReasonForceful)
	}
	for _, p := range plan.Evict {
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
		err := c.kube.SubResource("eviction").Create(ctx, p, eviction)
		c.metrics.EvictionRequested(statusCode(err))
		if err == nil {
			c.metrics.PodDrained(disruptionReason(nc))
		}
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		case apierrors.IsTooManyRequests(err):
			c.recorder.Eventf(p, corev1.EventTypeWarning, ReasonFailedDraining, "Failed to evict pod: %s", err)
		default:
			return reconcile.Result{}, fmt.Errorf("evicting pod %s/%s from node %s: %w", p.Namespace, p.Name, node.Name, err)
		}
	}
	if !plan.Drained() {
		if nc != nil {
			c.setCondition(ctx, nc, karpv1.ConditionTypeDrained, metav1.ConditionUnknown, "Draining", fmt.Sprintf("%d pods left", plan.Waiting+len(plan.Evict)))
		}
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if nc != nil {
		c.setCondition(ctx, nc, karpv1.ConditionTypeDrained, metav1.ConditionTrue, karpv1.ConditionTypeDrained, "")
		if waiting, err := c.awaitVolumes(ctx, nc, node, pointers(pods.Items)); waiting || err != nil {
			return reconcile.Result{RequeueAfter: volumeRequeue}, err
		}
		if done, err := c.terminateInstance(ctx, nc); !done || err != nil {
			return reconcile.Result{RequeueAfter: 5 * time.Second}, err
		}
	}
	return reconcile.Result{}, c.release(ctx, node, true)
}

// cordon taints the node disrupted and takes it out of load balancers,
// keeping every other taint and label, including those another actor
// writes meanwhile.
func (c *Controller) cordon(ctx context.Context, node *corev1.Node) error {
	err := PatchLockedReading(ctx, c.kube, c.reader, node, func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) }) &&
			n.Labels[labelExcludeFromLB] == "karpenter" {
			return false
		}
		n.Spec.Taints = append(slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintKeyDisrupted }),
			karpv1.DisruptedNoScheduleTaint)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[labelExcludeFromLB] = "karpenter"
		return true
	})
	if err != nil {
		return fmt.Errorf("tainting node %s disrupted: %w", node.Name, err)
	}
	return nil
}

// release removes the node's finalizer; drained says whether it was
// drained first (a node whose instance vanished is not).
func (c *Controller) release(ctx context.Context, node *corev1.Node, drained bool) error {
	if err := PatchLockedReading(ctx, c.kube, c.reader, node, func(n *corev1.Node) bool { return controllerutil.RemoveFinalizer(n, karpv1.TerminationFinalizer) }); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer of node %s: %w", node.Name, err))
	}
	c.metrics.NodeTerminated(node, drained, c.clock.Now())
	return nil
}

// disruptionReason is why the NodeClaim is being disrupted (its
// DisruptionReason condition), or "" when it was simply deleted.
func disruptionReason(nc *karpv1.NodeClaim) string {
	if nc == nil {
		return ""
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

// statusCode is the HTTP status an API call was answered with.
func statusCode(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}

func (c *Controller) setCondition(ctx context.Context, nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) {
	if existing := meta.FindStatusCondition(nc.Status.Conditions, t); existing != nil && existing.Status == status && existing.Message == message {
		return
	}
	now := metav1.NewTime(c.clock.Now())
	// A patch of the condition alone, retried on a fresh copy after a
	// conflict; informational, so a failure waits for the next pass.
	_, _ = fieldpatch.Status(ctx, c.kube, c.reader, nc, func(nc *karpv1.NodeClaim) {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
			ObservedGeneration: nc.Generation, LastTransitionTime: now})
	})
}

func deadlineOf(nc *karpv1.NodeClaim) *time.Time {
	if nc == nil {
		return nil
	}
	v, ok := nc.Annotations[karpv1.AnnotationNodeClaimTerminationTime]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	return &t
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pointers(pods []corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i := range pods {
		out[i] = &pods[i]
	}
	return out
}
