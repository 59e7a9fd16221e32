package fake

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/watch"
	"github.com/nodewright/nodewright/providers/kwok"
)

// Machines play the fake's instances once they boot: each running
// instance's kubelet registers its Node (name, provider ID, the labels
// and taints its user data asks for, the type's capacity), and the Node of
// an instance that is gone is deleted, as the cloud node lifecycle
// controller does. Readiness, heartbeats and pods are the kwok kubelet's
// job (with the "aws:///" provider-ID prefix).
type Machines struct {
	server *Server
	kube   client.Client
	clock  clock.Clock
	// BootDelay is how long an instance takes to register its Node.
	BootDelay time.Duration
	// Interval is how often instances are looked at (default 500 ms).
	Interval time.Duration
}

// Machines returns the machines of the fake's instances, registering with
// kube.
func (s *Server) Machines(kube client.Client, clk clock.Clock) *Machines {
	return &Machines{server: s, kube: kube, clock: clk, Interval: 500 * time.Millisecond}
}

// Start syncs until ctx ends (a controller-runtime Runnable).
func (m *Machines) Start(ctx context.Context) error {
	for {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			fmt.Printf("fake aws machines: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.clock.After(m.Interval):
		}
	}
}

// Join has the fake's instances join a cluster until ctx ends: the
// machines register Nodes, an emulated kubelet (kwok's, for "aws:///"
// provider IDs) reports them Ready and runs their pods.
func (s *Server) Join(ctx context.Context, restConfig *rest.Config, bootDelay time.Duration) error {
	mgr, err := ctrl.NewManager(restConfig, manager.Options{Scheme: clientgoscheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return fmt.Errorf("fake aws machines: %w", err)
	}
	kubelet := kwok.NewKubelet(mgr.GetClient(), clock.RealClock{}, kwok.KubeletOptions{Name: "fakeaws.kubelet", ProviderIDPrefixes: []string{"aws:///"}})
	if err := kubelet.SetupWithManager(mgr); err != nil {
		return err
	}
	machines := s.Machines(mgr.GetClient(), clock.RealClock{})
	machines.BootDelay = bootDelay
	if err := mgr.Add(machines); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Controllers declare the machines as a controller woken by every
// NodeClaim change and again when the next instance finishes booting
// (the simulator's way to run them on its virtual clock).
func (m *Machines) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "fakeaws.machines", Reconciler: reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		next, err := m.sync(ctx)
		return reconcile.Result{RequeueAfter: next}, err
	}), Sources: []watch.Source{watch.For(&karpv1.NodeClaim{}, nil)}}}
}

// Sync registers the Nodes of running instances that have none and
// deletes the Nodes of instances that are gone.
func (m *Machines) Sync(ctx context.Context) error {
	_, err := m.sync(ctx)
	return err
}

// sync is Sync, also returning how long until the next instance boots
// (0: none is booting).
func (m *Machines) sync(ctx context.Context) (time.Duration, error) {
	nodes := &corev1.NodeList{}
	if err := m.kube.List(ctx, nodes); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	have := map[string]*corev1.Node{}
	for i := range nodes.Items {
		have[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	now := m.clock.Now()
	var next time.Duration
	for _, in := range m.server.Instances() {
		providerID := fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)
		node, registered := have[providerID]
		switch {
		case in.State == "running" && !registered && now.Sub(in.LaunchTime) < m.BootDelay:
			if wait := m.BootDelay - now.Sub(in.LaunchTime); next == 0 || wait < next {
				next = wait
			}
		case in.State == "running" && !registered:
			n, err := m.server.node(in)
			if err != nil {
				return 0, err
			}
			if err := m.kube.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
				return 0, fmt.Errorf("registering the node of instance %s: %w", in.ID, err)
			}
		case (in.State == "terminated" || in.State == "shutting-down") && registered:
			if err := m.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting the node of instance %s: %w", in.ID, err)
			}
		}
	}
	return next, nil
}

// node is the Node an instance's kubelet registers.
func (s *Server) node(in Instance) (*corev1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var capacity, allocatable corev1.ResourceList
	labels := map[string]string{}
	for i := range s.catalog {
		if it := &s.catalog[i]; it.Name == in.InstanceType {
			capacity, allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
			for k, v := range it.Labels {
				labels[k] = v
			}
		}
	}
	if capacity == nil {
		return nil, fmt.Errorf("instance %s: type %s is not in the catalog", in.ID, in.InstanceType)
	}
	bootLabels, taints, err := bootSettings(in.UserData)
	if err != nil {
		return nil, fmt.Errorf("instance %s: user data: %w", in.ID, err)
	}
	for k, v := range bootLabels {
		labels[k] = v
	}
	name := in.PrivateDNSName
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelTopologyZone] = in.Zone
	labels[corev1.LabelTopologyRegion] = s.region
	labels[corev1.LabelInstanceTypeStable] = in.InstanceType
	labels[corev1.LabelOSStable] = "linux"
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID), Taints: taints},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable},
	}, nil
}

var (
	flagLabels = regexp.MustCompile(`--node-labels="?([^"\n]*)"?`)
	flagTaints = regexp.MustCompile(`--register-with-taints="?([^"\n]*)"?`)
)

// bootSettings reads the labels and taints a node registers with from its
// user data: nodeadm's kubelet flags (AL2023), or Bottlerocket's
// node-labels and node-taints settings.
func bootSettings(userData string) (map[string]string, []corev1.Taint, error) {
	labels := map[string]string{}
	var taints []corev1.Taint
	if strings.Contains(userData, "[settings.kubernetes") {
		table := ""
		for _, line := range strings.Split(userData, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "[") {
				table = strings.Trim(line, "[]")
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			key, _ := strconv.Unquote(strings.TrimSpace(k))
			switch table {
			case "settings.kubernetes.node-labels":
				labels[key], _ = strconv.Unquote(strings.TrimSpace(v))
			case "settings.kubernetes.node-taints":
				for _, item := range strings.Split(strings.Trim(strings.TrimSpace(v), "[]"), ",") {
					item, _ = strconv.Unquote(strings.TrimSpace(item))
					value, effect, _ := strings.Cut(item, ":")
					taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
				}
			}
		}
		return labels, taints, nil
	}
	if m := flagLabels.FindStringSubmatch(userData); m != nil && m[1] != "" {
		for _, kv := range strings.Split(m[1], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, nil, fmt.Errorf("--node-labels entry %q is not KEY=VALUE", kv)
			}
			labels[k] = v
		}
	}
	if m := flagTaints.FindStringSubmatch(userData); m != nil && m[1] != "" {
		for _, t := range strings.Split(m[1], ",") {
			kv, effect, ok := strings.Cut(t, ":")
			if !ok {
				return nil, nil, fmt.Errorf("--register-with-taints entry %q has no effect", t)
			}
			k, v, _ := strings.Cut(kv, "=")
			taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
		}
	}
	return labels, taints, nil
}
