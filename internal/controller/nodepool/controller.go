package nodepool

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/internal/metrics"
)

// StatusInterval is how often at most a NodePool's resources and node
// count are written: a burst of node changes makes one write, not one per
// change. Condition changes (Ready) are written at once.
const StatusInterval = 2 * time.Second

// Controller maintains NodePool status.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	metrics  *metrics.Metrics
	reader   client.Reader
	interval time.Duration

	mu        sync.Mutex
	lastWrite map[string]time.Time // NodePool -> its last status write
}

// New wires the controller.
func New(kube client.Client, clk clock.Clock, m *metrics.Metrics) *Controller {
	return &Controller{kube: kube, clock: clk, metrics: m, interval: StatusInterval, lastWrite: map[string]time.Time{}}
}

// WithAPIReader has status writes that conflict read the pool again
// through r (the manager's APIReader) rather than through the cache.
func (c *Controller) WithAPIReader(r client.Reader) *Controller {
	c.reader = r
	return c
}

// WithStatusInterval sets how often at most resources and node counts are
// written (0: at every change).
func (c *Controller) WithStatusInterval(d time.Duration) *Controller {
	c.interval = d
	return c
}

// Controllers declares the reconciler, woken by NodePools, their nodes and
// NodeClasses.
func (c *Controller) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "nodepool.status", Reconciler: c, Sources: []watch.Source{
		watch.For(&karpv1.NodePool{}, nil),
		watch.Mapped(&corev1.Node{}, poolOfNode),
		watch.Mapped(&kwokv1alpha1.KWOKNodeClass{}, c.poolsOfNodeClass),
		watch.Mapped(&awsv1.EC2NodeClass{}, c.poolsOfNodeClass),
	}}}
}

func poolOfNode(_ context.Context, o client.Object) []reconcile.Request {
	if pool := o.GetLabels()[karpv1.LabelNodePool]; pool != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
	}
	return nil
}

func (c *Controller) poolsOfNodeClass(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &karpv1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, np := range pools.Items {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: np.Name}})
		}
	}
	return out
}

// Reconcile recomputes one NodePool's status. A write that still
// conflicts after its retries requeues the pool without an error.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req)
	if fieldpatch.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("write conflict, requeueing", "NodePool", req.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: fieldpatch.ConflictRequeue}, nil
	}
	return res, err
}

func (c *Controller) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.metrics.ForgetNodePool(req.Name)
			c.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := c.stampHash(ctx, np); err != nil {
		return reconcile.Result{}, err
	}
	class, err := c.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return reconcile.Result{}, err
	}
	base := np.DeepCopy()
	for _, cond := range Conditions(np, class) {
		if existing := meta.FindStatusCondition(np.Status.Conditions, cond.Type); existing != nil && existing.Status == cond.Status {
			cond.LastTransitionTime = existing.LastTransitionTime
		} else {
			cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
		}
		meta.SetStatusCondition(&np.Status.Conditions, cond)
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingLabels{karpv1.LabelNodePool: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the nodes of nodepool %s: %w", np.Name, err)
	}
	np.Status.Resources = Resources(nodes.Items)
	c.metrics.NodePool(np)
	count := int64(len(nodes.Items))
	np.Status.Nodes = &count
	return c.writeStatus(ctx, base, np)
}

// ownedConditions are the NodePool conditions this controller writes.
var ownedConditions = []string{karpv1.ConditionTypeValidationSucceeded, karpv1.ConditionTypeNodeClassReady, karpv1.ConditionTypeReady}

// writeStatus writes the change from base (as read) to want: at once when
// a condition changed, otherwise (resources and node count) no sooner than
// the interval after the pool's last write, requeueing until then. The
// conditions list goes whole in a merge patch, so that patch is locked to
// base's version and a conflict applies the same change to a fresh copy;
// resources (a map) and nodes (a number) merge without a lock.
func (c *Controller) writeStatus(ctx context.Context, base, want *karpv1.NodePool) (reconcile.Result, error) {
	was := base.Status
	if equality.Semantic.DeepEqual(was, want.Status) {
		return reconcile.Result{}, nil
	}
	now := c.clock.Now()
	if equality.Semantic.DeepEqual(was.Conditions, want.Status.Conditions) {
		if wait := c.wait(want.Name, now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	written, err := fieldpatch.Status(ctx, c.kube, c.reader, base.DeepCopy(), func(np *karpv1.NodePool) {
		fieldpatch.OwnedConditions(&np.Status.Conditions, was.Conditions, want.Status.Conditions, ownedConditions...)
		np.Status.Resources = want.Status.Resources.DeepCopy()
		np.Status.Nodes = want.Status.Nodes
	})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("updating nodepool %s status: %w", want.Name, err)
	}
	if written {
		c.mu.Lock()
		c.lastWrite[want.Name] = now
		c.mu.Unlock()
	}
	return reconcile.Result{}, nil
}

// wait is how long the pool's next status write must wait.
func (c *Controller) wait(name string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.lastWrite[name]
	if !ok {
		return 0
	}
	return max(last.Add(c.interval).Sub(now), 0)
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastWrite, name)
}

// stampHash writes the template hash on the pool and, when the hash
// version changed, re-stamps the pool's NodeClaims of an older version with
// the current hash so a version bump drifts nothing.
func (c *Controller) stampHash(ctx context.Context, np *karpv1.NodePool) error {
	hash, err := Hash(np)
	if err != nil {
		return err
	}
	versionChanged := np.Annotations[karpv1.AnnotationNodePoolHashVersion] != HashVersion
	if annotations, changed := Stamped(np.Annotations, hash); changed {
		patch := client.MergeFrom(np.DeepCopy())
		np.Annotations = annotations
		if err := c.kube.Patch(ctx, np, patch); err != nil {
			return fmt.Errorf("annotating nodepool %s with its hash: %w", np.Name, err)
		}
	}
	if !versionChanged {
		return nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{karpv1.LabelNodePool: np.Name}); err != nil {
		return fmt.Errorf("listing the nodeclaims of nodepool %s: %w", np.Name, err)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Annotations[karpv1.AnnotationNodePoolHashVersion] == HashVersion {
			continue
		}
		patch := client.MergeFrom(nc.DeepCopy())
		nc.Annotations, _ = Stamped(nc.Annotations, hash)
		if err := c.kube.Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("re-stamping the hash of nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}

// Resources sums the nodes' capacity; cpu, memory, pods, ephemeral-storage
// and nodes are always present.
func Resources(nodes []corev1.Node) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, "nodes"} {
		out[name] = resource.MustParse("0")
	}
	for _, n := range nodes {
		for name, q := range n.Status.Capacity {
			cur := out[name]
			cur.Add(q)
			out[name] = cur
		}
	}
	out["nodes"] = *resource.NewQuantity(int64(len(nodes)), resource.DecimalSI)
	return out
}

// contentOf is an object's fields as unstructured content.
func contentOf(obj client.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// nodeClass reads the referenced NodeClass whatever its kind.
func (c *Controller) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference) (NodeClassState, error) {
	if ref == nil {
		return NodeClassState{}, nil
	}
	mapping, err := c.kube.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
	if err != nil {
		if meta.IsNoMatchError(err) {
			return NodeClassState{}, nil // no such kind: not found
		}
		return NodeClassState{}, fmt.Errorf("looking up %s %s: %w", ref.Kind, ref.Name, err)
	}
	// A kind the scheme knows is read typed, so from the informer cache
	// (the client reads unstructured objects from the API server, a GET
	// per reconcile); another provider's kind, unstructured.
	var obj client.Object
	if typed, err := c.kube.Scheme().New(mapping.GroupVersionKind); err == nil {
		obj, _ = typed.(client.Object)
	}
	if obj == nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(mapping.GroupVersionKind)
		obj = u
	}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return NodeClassState{}, nil
		}
		return NodeClassState{}, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	content, err := contentOf(obj)
	if err != nil {
		return NodeClassState{}, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	state := NodeClassState{Found: true, Deleting: obj.GetDeletionTimestamp() != nil}
	conds, _, _ := unstructured.NestedSlice(content, "status", "conditions")
	for _, raw := range conds {
		m, ok := raw.(map[string]any)
		if !ok || m["type"] != karpv1.ConditionTypeReady {
			continue
		}
		cond := &metav1.Condition{Type: karpv1.ConditionTypeReady}
		if s, ok := m["status"].(string); ok {
			cond.Status = metav1.ConditionStatus(s)
		}
		cond.Reason, _ = m["reason"].(string)
		cond.Message, _ = m["message"].(string)
		state.Ready = cond
	}
	return state, nil
}
