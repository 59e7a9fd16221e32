package operator

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	cpmetrics "github.com/nodewright/nodewright/pkg/cloudprovider/metrics"
)

// Config is everything Run needs; `nodewright controller` fills it from
// flags and environment variables.
type Config struct {
	// CloudProvider names the provider: "kwok" or "aws".
	CloudProvider string
	// AWS configures the aws provider.
	AWS AWSConfig
	// InstanceTypes for the kwok provider.
	InstanceTypes []catalog.InstanceType
	// KWOKRefusedOfferings fail kwok launches with insufficient capacity
	// (for tests and the simulator).
	KWOKRefusedOfferings []cloudprovider.Offering
	// KWOKServesEC2NodeClasses has the kwok provider launch for NodePools
	// naming an EC2NodeClass too (the simulator plays AWS manifests).
	KWOKServesEC2NodeClasses bool
	// KWOKKubelet emulates the kubelet of kwok nodes (Ready, pods Running).
	KWOKKubelet bool
	// KWOKKubeletProviderIDPrefixes are the nodes the emulated kubelet
	// plays (default: kwok's; the simulator adds the fake AWS's).
	KWOKKubeletProviderIDPrefixes []string
	RegistrationDelay             time.Duration
	// KWOKHeartbeat is how often the emulated kubelet renews Ready (0:
	// a minute).
	KWOKHeartbeat time.Duration
	// BatchIdle and BatchMax shape provisioning windows.
	BatchIdle, BatchMax time.Duration
	// KubeClientQPS and KubeClientBurst rate-limit Nodewright's requests
	// to the API server (0: DefaultKubeClientQPS and
	// DefaultKubeClientBurst, Karpenter's; client-go's own 5 and 10 would
	// throttle a cluster of thousands of pods).
	KubeClientQPS   float32
	KubeClientBurst int
	// InformerResync is how often the informers replay every object they
	// hold as an update, waking the controllers on it (nil:
	// controller-runtime's 10 h; 0: never). It reads nothing from the API.
	InformerResync *time.Duration
	// ControllerWorkers is how many objects each controller reconciles at
	// once (never the same object twice at once). Run: 0 means
	// DefaultControllerWorkers. Build applies it as given, 0 meaning one
	// (the simulator serves the controllers one request at a time).
	ControllerWorkers int
	// WriteWorkers is how many writes of one decision are sent at once:
	// the NodeClaims of one provisioning decision, the hints to the pods
	// planned onto one node, the candidates of one disruption command. Run: 0 means provisioning.DefaultCreateWorkers.
	// Build applies it as given, 0 meaning one after another (the
	// simulator's in-memory API and its seeded faults are
	// single-threaded).
	WriteWorkers    int
	MinValuesPolicy sched.MinValuesPolicy
	// SpotToSpotConsolidation lets consolidation replace spot nodes with
	// cheaper spot nodes (Karpenter's feature gate of that name).
	SpotToSpotConsolidation bool
	// NominatedNodeHints has the pods planned onto a registering node get
	// status.nominatedNodeName (internal/controller/nomination), so
	// kube-scheduler tries that node first and keeps their room. Off by
	// default, as Karpenter: kube-scheduler adds every pod nominated to a
	// node to that node at each filter of every attempt, so thousands of
	// hinted pods slow every attempt (measured live at 10,000 + 2,000
	// pods: 200 ms of filtering per pod, 5 bindings a second).
	NominatedNodeHints bool
	// OrphanInstanceAge is how old an instance no NodeClaim owns must be
	// before garbage collection terminates it (0 means 30 s).
	OrphanInstanceAge time.Duration
	// MetricsAddr and HealthAddr are listen addresses ("0" disables).
	MetricsAddr, HealthAddr string
	// LeaderElection with the lease in LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	Logger                  logr.Logger
	// Clock is the real clock in production; tests may inject another.
	Clock clock.Clock
	// Version labels karpenter_build_info.
	Version string
	// Embedded allows more than one Run in a process (tests, the
	// simulator): controller names need not be unique process-wide.
	Embedded bool
}

// Scheme knows the core kinds and Nodewright's.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, awsv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run runs the controllers until ctx ends.
func Run(ctx context.Context, restConfig *rest.Config, conf Config) error {
	conf = conf.withRunDefaults()
	restConfig = clientConfig(restConfig, conf)
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	ctrl.SetLogger(conf.Logger)
	mgr, err := ctrl.NewManager(restConfig, managerOptions(conf, scheme))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	m, cpm, err := processMetrics(conf.Version)
	if err != nil {
		return err
	}
	if err := IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if conf.CloudProvider == "aws" && conf.AWS.ClusterEndpoint == "" {
		conf.AWS.ClusterEndpoint = restConfig.Host
	}
	if conf.CloudProvider == "aws" && conf.AWS.KubernetesVersion == "" {
		if conf.AWS.KubernetesVersion, err = serverVersion(restConfig); err != nil {
			return err
		}
	}
	c, err := Build(conf, Dependencies{Kube: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("karpenter"), Metrics: m, CloudProviderMetrics: cpm})
	if err != nil {
		return err
	}
	for _, w := range c.Controllers {
		if err := w.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", w.Name, err)
		}
	}
	if err := mgr.Add(c.GarbageCollector.Runnable()); err != nil {
		return err
	}
	if err := mgr.Add(c.Disruption.Runnable()); err != nil {
		return err
	}
	for _, r := range c.Runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	if c.Interruption != nil {
		if err := mgr.Add(c.Interruption); err != nil {
			return err
		}
	}
	unregister, err := registerClusterCollector(metrics.NewClusterCollector(c.Cluster, conf.Clock, catalogPricer(conf.InstanceTypes)), conf.Logger)
	if err != nil {
		return err
	}
	defer unregister()
	if err := feed(ctx, mgr.GetCache(), mgr.GetCache(), c.Cluster, c.Batcher.Trigger); err != nil {
		return err
	}
	if err := mgr.Add(provisioning.Loop(c.Provisioner, c.Batcher, conf.Clock, conf.Logger.WithName("provisioner"))); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Defaults Run applies to a zero Config, sized for clusters of thousands
// of nodes.
const (
	// DefaultKubeClientQPS and DefaultKubeClientBurst are Karpenter's
	// (--kube-client-qps, --kube-client-burst).
	DefaultKubeClientQPS   = 200
	DefaultKubeClientBurst = 300
	// DefaultControllerWorkers: a reconcile spends most of its time
	// waiting on the API server or the cloud, so a few tens of them at
	// once keep the client's QPS in use without queueing behind its rate
	// limiter.
	DefaultControllerWorkers = 20
)

// withRunDefaults fills what Run defaults and Build takes as given.
func (conf Config) withRunDefaults() Config {
	if conf.Clock == nil {
		conf.Clock = clock.RealClock{}
	}
	if conf.KubeClientQPS == 0 {
		conf.KubeClientQPS = DefaultKubeClientQPS
	}
	if conf.KubeClientBurst == 0 {
		conf.KubeClientBurst = DefaultKubeClientBurst
	}
	if conf.ControllerWorkers == 0 {
		conf.ControllerWorkers = DefaultControllerWorkers
	}
	if conf.WriteWorkers == 0 {
		conf.WriteWorkers = provisioning.DefaultCreateWorkers
	}
	return conf
}

// clientConfig is a copy of restConfig rate-limited as conf says (the
// caller's is left alone). A RateLimiter already set wins over QPS and
// burst, as in client-go.
func clientConfig(restConfig *rest.Config, conf Config) *rest.Config {
	out := rest.CopyConfig(restConfig)
	out.QPS, out.Burst = conf.KubeClientQPS, conf.KubeClientBurst
	return out
}

// managerOptions are the controller manager's options for conf.
func managerOptions(conf Config, scheme *runtime.Scheme) manager.Options {
	return manager.Options{
		Scheme:                        scheme,
		Logger:                        conf.Logger,
		Metrics:                       metricsserver.Options{BindAddress: conf.MetricsAddr},
		HealthProbeBindAddress:        conf.HealthAddr,
		LeaderElection:                conf.LeaderElection,
		LeaderElectionID:              "nodewright-leader-election",
		LeaderElectionNamespace:       conf.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // a replica shutting down hands over at once
		Controller:                    config.Controller{SkipNameValidation: &conf.Embedded},
		// managedFields are never read here and are a good part of every
		// cached pod: not keeping them saves memory at thousands of pods.
		Cache: cache.Options{SyncPeriod: conf.InformerResync, DefaultTransform: cache.TransformStripManagedFields()},
	}
}

// The metrics live in controller-runtime's registry, served on the metrics
// address; they are registered once per process, so a second Run (tests,
// the simulator) adds to the same series.
var (
	metricsOnce sync.Once
	procMetrics *metrics.Metrics
	procCP      *cpmetrics.Metrics
	metricsErr  error
)

func processMetrics(version string) (*metrics.Metrics, *cpmetrics.Metrics, error) {
	metricsOnce.Do(func() {
		if procCP, metricsErr = cpmetrics.New(ctrlmetrics.Registry); metricsErr != nil {
			metricsErr = fmt.Errorf("registering cloudprovider metrics: %w", metricsErr)
			return
		}
		if procMetrics, metricsErr = metrics.New(ctrlmetrics.Registry, version, buildCommit()); metricsErr != nil {
			metricsErr = fmt.Errorf("registering controller metrics: %w", metricsErr)
		}
	})
	return procMetrics, procCP, metricsErr
}

// registerClusterCollector serves the cluster gauges until unregister is
// called. A second Run in the process (tests, the simulator) finds one
// registered already and leaves it.
func registerClusterCollector(c *metrics.ClusterCollector, log logr.Logger) (unregister func(), err error) {
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			log.Info("cluster gauges are served by another run in this process")
			return func() {}, nil
		}
		return nil, fmt.Errorf("registering the cluster gauges: %w", err)
	}
	return func() { ctrlmetrics.Registry.Unregister(c) }, nil
}

// catalogPricer prices offerings from the instance types.
func catalogPricer(types []catalog.InstanceType) metrics.Pricer {
	type key struct{ instanceType, zone, capacityType string }
	prices := map[key]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			prices[key{it.Name, o.Zone, o.CapacityType}] = o.Price
		}
	}
	return func(instanceType, zone, capacityType string) (float64, bool) {
		p, ok := prices[key{instanceType, zone, capacityType}]
		return p, ok
	}
}

// buildCommit is the VCS revision the binary was built from, or "".
func buildCommit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
