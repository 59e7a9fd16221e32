package kwok

import (
	"context"
	"fmt"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// KubeletOptions configure the emulated kubelet of kwok nodes.
type KubeletOptions struct {
	// RegistrationDelay is how long after its creation a node turns Ready.
	RegistrationDelay time.Duration
	// HeartbeatInterval is how often a Ready node's condition is renewed.
	HeartbeatInterval time.Duration
	// ProviderIDPrefixes are the nodes it plays the kubelet of (default:
	// kwok's); the fake AWS adds "aws:///" for its instances' nodes.
	ProviderIDPrefixes []string
	// Name prefixes its controllers' names (default "kwok.kubelet").
	Name string
}

// DefaultKubeletOptions: ready at once, a heartbeat a minute.
var DefaultKubeletOptions = KubeletOptions{HeartbeatInterval: time.Minute}

// Kubelet plays the kubelet of kwok nodes: it reports them Ready once the
// registration delay has passed (and keeps the heartbeat fresh), removes the
// node.kubernetes.io/not-ready taints the API server put on them, runs the
// pods bound to them (phase Running, conditions True), and finishes pods
// being deleted (their containers stop at once).
type Kubelet struct {
	kube  client.Client
	clock clock.Clock
	opts  KubeletOptions
}

// NewKubelet returns the emulator; register it with SetupWithManager (or
// serve Controllers another way, as the simulator does).
func NewKubelet(kube client.Client, clk clock.Clock, opts KubeletOptions) *Kubelet {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultKubeletOptions.HeartbeatInterval
	}
	if opts.Name == "" {
		opts.Name = "kwok.kubelet"
	}
	if len(opts.ProviderIDPrefixes) == 0 {
		opts.ProviderIDPrefixes = []string{ProviderIDPrefix}
	}
	return &Kubelet{kube: kube, clock: clk, opts: opts}
}

// plays reports whether the emulator is the kubelet of a node.
func (k *Kubelet) plays(n *corev1.Node) bool {
	return slices.ContainsFunc(k.opts.ProviderIDPrefixes, func(p string) bool { return strings.HasPrefix(n.Spec.ProviderID, p) })
}

// Controllers declares two reconcilers: kwok nodes, and pods bound to
// nodes.
func (k *Kubelet) Controllers() []watch.Controller {
	played := func(o client.Object) bool {
		n, ok := o.(*corev1.Node)
		return ok && k.plays(n)
	}
	bound := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Spec.NodeName != "" && (p.Status.Phase == corev1.PodPending || p.DeletionTimestamp != nil)
	}
	return []watch.Controller{
		{Name: k.opts.Name + ".node", Reconciler: reconcile.Func(k.reconcileNode), Sources: []watch.Source{watch.For(&corev1.Node{}, played)}},
		{Name: k.opts.Name + ".pod", Reconciler: reconcile.Func(k.reconcilePod), Sources: []watch.Source{watch.For(&corev1.Pod{}, bound)}},
	}
}

// SetupWithManager registers the reconcilers with controller-runtime.
func (k *Kubelet) SetupWithManager(mgr ctrl.Manager) error {
	for _, c := range k.Controllers() {
		if err := c.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", c.Name, err)
		}
	}
	return nil
}

func (k *Kubelet) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := k.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := k.clock.Now()
	status, spec, wait := NodeUpdate(node, now, k.opts)
	if status != nil {
		if err := k.kube.Status().Update(ctx, status); err != nil {
			return reconcile.Result{}, fmt.Errorf("reporting node %s ready: %w", node.Name, err)
		}
		node = status
	}
	if spec != nil {
		spec.ResourceVersion = node.ResourceVersion
		if err := k.kube.Update(ctx, spec); err != nil {
			return reconcile.Result{}, fmt.Errorf("removing not-ready taints of node %s: %w", node.Name, err)
		}
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// NodeUpdate decides what the kubelet does to a node now: the status to
// write (Ready, heartbeat) or nil, the node with not-ready taints removed or
// nil, and when to look again.
func NodeUpdate(node *corev1.Node, now time.Time, opts KubeletOptions) (status, spec *corev1.Node, wait time.Duration) {
	readyAt := node.CreationTimestamp.Add(opts.RegistrationDelay)
	if now.Before(readyAt) {
		return nil, nil, readyAt.Sub(now)
	}
	ready := findCondition(node.Status.Conditions, corev1.NodeReady)
	if ready == nil || ready.Status != corev1.ConditionTrue || now.Sub(ready.LastHeartbeatTime.Time) >= opts.HeartbeatInterval {
		status = node.DeepCopy()
		status.Status.Phase = corev1.NodeRunning
		setReady(status, now)
	}
	if slices.ContainsFunc(node.Spec.Taints, isNotReadyTaint) {
		spec = node.DeepCopy()
		spec.Spec.Taints = slices.DeleteFunc(spec.Spec.Taints, isNotReadyTaint)
	}
	return status, spec, opts.HeartbeatInterval
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

func setReady(node *corev1.Node, now time.Time) {
	stamp := metav1.NewTime(now)
	if c := findCondition(node.Status.Conditions, corev1.NodeReady); c != nil {
		if c.Status != corev1.ConditionTrue {
			c.LastTransitionTime = stamp
		}
		c.Status, c.Reason, c.Message, c.LastHeartbeatTime = corev1.ConditionTrue, "KubeletReady", "kwok kubelet is posting ready status", stamp
		return
	}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kwok kubelet is posting ready status", LastHeartbeatTime: stamp, LastTransitionTime: stamp,
	})
}

func (k *Kubelet) reconcilePod(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.kube.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	node := &corev1.Node{}
	if err := k.kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if !k.plays(node) {
		return reconcile.Result{}, nil // a real kubelet's pod
	}
	if pod.DeletionTimestamp != nil {
		// The containers have stopped: remove the pod, as a kubelet does.
		if err := k.kube.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("finishing pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return reconcile.Result{}, nil
	}
	running := RunningPod(pod, k.clock.Now())
	if running == nil {
		return reconcile.Result{}, nil
	}
	if err := k.kube.Status().Update(ctx, running); err != nil {
		return reconcile.Result{}, fmt.Errorf("running pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return reconcile.Result{}, nil
}

// RunningPod returns the pod as a kubelet would report it once started, or
// nil when there is nothing to do.
func RunningPod(pod *corev1.Pod, now time.Time) *corev1.Pod {
	if pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return nil
	}
	out := pod.DeepCopy()
	stamp := metav1.NewTime(now)
	out.Status.Phase = corev1.PodRunning
	out.Status.StartTime = &stamp
	out.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: stamp})
	}
	out.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: stamp}},
		})
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
