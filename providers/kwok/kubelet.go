package kwok

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodewright/nodewright/internal/controller/watch"
)

// KubeletOptions configure the emulated kubelet of kwok nodes.
type KubeletOptions struct {
	// RegistrationDelay is how long after its creation a node turns Ready.
	RegistrationDelay time.Duration
	// HeartbeatInterval is how often the kubelet proves it is alive: it
	// renews its node's Lease in kube-node-lease this often (default 10s,
	// a kubelet's renewal interval). The node lifecycle controller marks a
	// node Unknown when it sees neither a lease renewal nor a fresh Ready
	// heartbeat for its grace period (50s by default), so keep this well
	// below that where one runs; the simulator, which has none, sets an
	// hour to save writes.
	HeartbeatInterval time.Duration
	// StatusInterval is how often the Ready condition's heartbeat is
	// re-posted in the node's status when nothing changed (default a
	// minute; never more often than HeartbeatInterval).
	StatusInterval time.Duration
	// ProviderIDPrefixes are the nodes it plays the kubelet of (default:
	// kwok's); the fake AWS adds "aws:///" for its instances' nodes.
	ProviderIDPrefixes []string
	// Name prefixes its controllers' names (default "kwok.kubelet").
	Name string
	// Workers are how many pods and nodes it reconciles at once.
	Workers KubeletWorkers
}

// KubeletWorkers size the emulated kubelet's controllers. Requests for one
// object are never reconciled concurrently.
type KubeletWorkers struct {
	// Pods: default 32.
	Pods int
	// Nodes: default 8.
	Nodes int
}

// DefaultKubeletOptions: ready at once, a lease renewal every 10s, a
// status heartbeat a minute.
var DefaultKubeletOptions = KubeletOptions{
	HeartbeatInterval: 10 * time.Second,
	StatusInterval:    time.Minute,
	Workers:           KubeletWorkers{Pods: 32, Nodes: 8},
}

// Kubelet plays the kubelet of kwok nodes: it reports them Ready once the
// registration delay has passed (and keeps their lease and Ready heartbeat
// fresh), removes the node.kubernetes.io/not-ready taints the API server
// put on them, runs the pods bound to them (phase Running, conditions
// True), and finishes pods being deleted (their containers stop at once).
//
// It writes only what a kubelet owns, by patches that do not depend on the
// object's resource version, so it does not fight the node lifecycle
// controller, kube-scheduler or Nodewright over whole-object updates.
type Kubelet struct {
	kube   client.Client
	clock  clock.Clock
	opts   KubeletOptions
	leases *leases
	// finished are the pods it removed whose deletion the cache may not
	// show yet.
	finished *finished
}

// NewKubelet returns the emulator; register it with SetupWithManager (or
// serve Controllers another way, as the simulator does). kube should read
// from a cache (the manager's client): every reconcile reads its pod and
// node through it.
func NewKubelet(kube client.Client, clk clock.Clock, opts KubeletOptions) *Kubelet {
	d := DefaultKubeletOptions
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = d.HeartbeatInterval
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = d.StatusInterval
	}
	opts.StatusInterval = max(opts.StatusInterval, opts.HeartbeatInterval)
	if opts.Name == "" {
		opts.Name = "kwok.kubelet"
	}
	if len(opts.ProviderIDPrefixes) == 0 {
		opts.ProviderIDPrefixes = []string{ProviderIDPrefix}
	}
	if opts.Workers.Pods <= 0 {
		opts.Workers.Pods = d.Workers.Pods
	}
	if opts.Workers.Nodes <= 0 {
		opts.Workers.Nodes = d.Workers.Nodes
	}
	return &Kubelet{kube: kube, clock: clk, opts: opts, leases: &leases{renewed: map[string]time.Time{}}, finished: &finished{uids: map[types.NamespacedName]types.UID{}}}
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
		{Name: k.opts.Name + ".node", Reconciler: reconcile.Func(k.reconcileNode), Sources: []watch.Source{watch.For(&corev1.Node{}, played)}, Workers: k.opts.Workers.Nodes},
		{Name: k.opts.Name + ".pod", Reconciler: reconcile.Func(k.reconcilePod), Sources: []watch.Source{watch.For(&corev1.Pod{}, bound)}, Workers: k.opts.Workers.Pods},
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
