package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim/fieldpatch"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Event reasons, as Karpenter's.
const (
	ReasonDisruptionTerminating = "DisruptionTerminating"
	ReasonExpired               = "Expired"
	ReasonDisruptionBlocked     = "DisruptionBlocked"
	ReasonUnconsolidatable      = "Unconsolidatable"
)

// Metric reasons for karpenter_nodeclaims_disrupted_total.
const (
	MetricReasonEmpty   = "empty"
	MetricReasonExpired = "expired"
)

// DriftRecheck is how often a NodeClaim is checked for drift that no
// watched object announces (provider drift, instance types withdrawn), as
// Karpenter's 5 minutes.
const DriftRecheck = 5 * time.Minute

// Claims is the per-NodeClaim reconciler: pod events, Consolidatable,
// Drifted, expiration.
type Claims struct {
	kube     client.Client
	provider cloudprovider.CloudProvider
	cluster  *state.Cluster
	clock    clock.Clock
	recorder record.EventRecorder
	metrics  *metrics.Metrics

	// reader reads again after a write conflict (nil: through kube).
	reader client.Reader

	mu   sync.Mutex
	pods map[string]string // NodeClaim -> the pods on its node when last seen
}

// WithAPIReader has status writes that conflict read the claim again
// through r (the manager's APIReader) rather than through the cache.
func (c *Claims) WithAPIReader(r client.Reader) *Claims {
	c.reader = r
	return c
}

// NewClaims wires the reconciler.
func NewClaims(kube client.Client, provider cloudprovider.CloudProvider, cluster *state.Cluster, clk clock.Clock, recorder record.EventRecorder, m *metrics.Metrics) *Claims {
	return &Claims{kube: kube, provider: provider, cluster: cluster, clock: clk, recorder: recorder, metrics: m, pods: map[string]string{}}
}

// Controllers declares the reconciler: woken by NodeClaims, by the pods on
// their nodes, and by their NodePools.
func (c *Claims) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "nodeclaim.disruption", Reconciler: c, Sources: []watch.Source{
		watch.For(&karpv1.NodeClaim{}, nil),
		watch.Mapped(&corev1.Pod{}, func(_ context.Context, o client.Object) []reconcile.Request {
			if node := o.(*corev1.Pod).Spec.NodeName; node != "" {
				if claim := c.cluster.ClaimOfNode(node); claim != "" {
					return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: claim}}}
				}
			}
			return nil
		}),
		watch.Mapped(&karpv1.NodePool{}, func(ctx context.Context, o client.Object) []reconcile.Request {
			claims := &karpv1.NodeClaimList{}
			if err := c.kube.List(ctx, claims, client.MatchingLabels{karpv1.LabelNodePool: o.GetName()}); err != nil {
				return nil
			}
			out := make([]reconcile.Request, len(claims.Items))
			for i := range claims.Items {
				out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: claims.Items[i].Name}}
			}
			return out
		}),
	}}}
}

// PodEventDedupe is Karpenter's: a pod event within this long of the last
// one recorded is not written again (a node filling with a hundred pods is
// a few status writes, not a hundred). It is shorter than the 15 s
// validation, which checks a consolidation decision again anyway.
const PodEventDedupe = 10 * time.Second

// Reconcile records pod events, expires the NodeClaim when its time has
// come, and keeps its Consolidatable condition. A status write that still
// conflicts after its retries requeues the claim without an error.
func (c *Claims) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req)
	if fieldpatch.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("write conflict, requeueing", "NodeClaim", req.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: fieldpatch.ConflictRequeue}, nil
	}
	return res, err
}

func (c *Claims) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		c.forget(req.Name)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		c.forget(nc.Name)
		return reconcile.Result{}, nil
	}
	now := c.clock.Now()
	if expired, _ := disruption.Expired(nc, now); expired {
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonExpired, "Expiring nodeclaim: older than expireAfter (%s)", *nc.Spec.ExpireAfter.Duration)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("expiring nodeclaim %s: %w", nc.Name, err)
		}
		c.metrics.NodeClaimDisrupted(nc, MetricReasonExpired)
		return reconcile.Result{}, nil
	}
	before := nc.DeepCopy()
	changed, undo, err := c.podEvent(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed && (nc.Status.LastPodEventTime.IsZero() || now.Sub(nc.Status.LastPodEventTime.Time) >= PodEventDedupe) {
		nc.Status.LastPodEventTime = metav1.NewTime(now)
	}
	np := &karpv1.NodePool{}
	var wait time.Duration
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Labels[karpv1.LabelNodePool]}, np); err == nil {
		ok, message, left := disruption.Consolidatable(nc, np, now)
		setCondition(nc, karpv1.ConditionTypeConsolidatable, ok, "NotConsolidatable", message, now)
		wait = left
		if err := c.drift(ctx, nc, np); err != nil {
			undo()
			return reconcile.Result{}, err
		}
		if wait == 0 || wait > DriftRecheck {
			wait = DriftRecheck
		}
	}
	if err := c.writeStatus(ctx, before, nc); err != nil {
		undo() // the pod event is seen again next time
		return reconcile.Result{}, err
	}
	if _, left := disruption.Expired(nc, now); left > 0 && (wait == 0 || left < wait) {
		wait = left
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// ownedConditions are the NodeClaim conditions this reconciler writes.
var ownedConditions = []string{karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeDrifted}

// writeStatus writes the change from base (as read) to want of the fields
// this reconciler owns: lastPodEventTime, Consolidatable and Drifted. The
// conditions list goes whole in a merge patch, so that patch is locked to
// base's version: the lifecycle's, termination's and the disruption loop's
// conditions written meanwhile make it conflict, and the same change is
// then made on a fresh copy instead of dropping theirs. Nothing is written
// when nothing changed.
func (c *Claims) writeStatus(ctx context.Context, base, want *karpv1.NodeClaim) error {
	if equality.Semantic.DeepEqual(base.Status, want.Status) {
		return nil
	}
	was := base.Status
	if _, err := fieldpatch.Status(ctx, c.kube, c.reader, base.DeepCopy(), func(nc *karpv1.NodeClaim) {
		if !want.Status.LastPodEventTime.Equal(&was.LastPodEventTime) {
			nc.Status.LastPodEventTime = want.Status.LastPodEventTime
		}
		fieldpatch.OwnedConditions(&nc.Status.Conditions, was.Conditions, want.Status.Conditions, ownedConditions...)
	}); err != nil {
		return fmt.Errorf("updating nodeclaim %s status: %w", want.Name, err)
	}
	return nil
}

// drift keeps the Drifted condition: true with the reason while the
// launched NodeClaim no longer matches its NodePool or NodeClass, removed
// otherwise.
func (c *Claims) drift(ctx context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) error {
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return nil
	}
	var types []*catalog.InstanceType
	if c.provider != nil {
		var err error
		if types, err = c.provider.GetInstanceTypes(ctx, np); err != nil {
			types = nil // unknown now: not a reason to call the node drifted
		}
	}
	reason, message := disruption.Drifted(nc, np, types)
	if reason == "" && c.provider != nil {
		r, err := c.provider.IsDrifted(ctx, nc)
		if err != nil {
			return fmt.Errorf("checking nodeclaim %s for drift: %w", nc.Name, err)
		}
		if r != "" {
			reason, message = string(r), fmt.Sprintf("the instance no longer matches its NodeClass: %s", r)
		}
	}
	if reason == "" {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return nil
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	return nil
}

// podEvent reports whether the set of pods on the NodeClaim's node changed
// since the last look (a pod bound, or gone); undo forgets this look, for
// a pass whose status write failed.
func (c *Claims) podEvent(ctx context.Context, nc *karpv1.NodeClaim) (changed bool, undo func(), err error) {
	undo = func() {}
	if nc.Status.NodeName == "" {
		return false, undo, nil
	}
	pods := &corev1.PodList{}
	// Read only: the cache's objects are not copied.
	if err := c.kube.List(ctx, pods, client.MatchingFields{termination.PodNodeNameIndex: nc.Status.NodeName}, client.UnsafeDisableDeepCopy); err != nil {
		return false, undo, fmt.Errorf("listing the pods of node %s: %w", nc.Status.NodeName, err)
	}
	var keys []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			keys = append(keys, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(keys)
	now := strings.Join(keys, ",")
	c.mu.Lock()
	defer c.mu.Unlock()
	was, seen := c.pods[nc.Name]
	c.pods[nc.Name] = now
	undo = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pods[nc.Name] != now {
			return // a later look
		}
		if seen {
			c.pods[nc.Name] = was
		} else {
			delete(c.pods, nc.Name)
		}
	}
	return seen && was != now || !seen && len(keys) > 0 && nc.Status.LastPodEventTime.IsZero(), undo, nil
}

func (c *Claims) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, name)
}

// setCondition sets a condition True, or False with a reason and message.
func setCondition(nc *karpv1.NodeClaim, t string, ok bool, reason, message string, now time.Time) {
	cond := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now)}
	if !ok {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, message
	}
	meta.SetStatusCondition(&nc.Status.Conditions, cond)
}
