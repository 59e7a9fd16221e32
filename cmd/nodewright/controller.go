package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
)

// envDefault returns the environment variable, or def.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newControllerCommand() *cobra.Command {
	var (
		kubeconfig, cloudProvider, catalogFile, minValues, logLevel, featureGates string
		metricsAddr, healthAddr, leaderNamespace                                  string
		batchIdle, batchMax, registrationDelay                                    time.Duration
		leaderElect, kwokKubelet, hints                                           bool
		awsFlags                                                                  awsOptions
		scale                                                                     scaleOptions
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run Nodewright's controllers against a cluster",
		Long: `Runs the controllers against the cluster of --kubeconfig (or the in-cluster config): pods
kube-scheduler cannot place become NodeClaims, NodeClaims become nodes through the cloud
provider, and nodes are registered and initialized. Every flag can also be set by the
environment variable named in its help; the flag wins.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cloudProvider != "kwok" && cloudProvider != "aws" {
				return fmt.Errorf("--cloud-provider %q: want kwok or aws", cloudProvider)
			}
			policy := sched.MinValuesPolicy(minValues)
			if policy != sched.MinValuesStrict && policy != sched.MinValuesBestEffort {
				return fmt.Errorf("--min-values-policy %q: want Strict or BestEffort", minValues)
			}
			if batchIdle <= 0 || batchMax < batchIdle {
				return fmt.Errorf("--batch-idle-duration %s and --batch-max-duration %s: want 0 < idle <= max", batchIdle, batchMax)
			}
			if err := scale.validate(); err != nil {
				return err
			}
			level, err := zapcore.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level %q: %w", logLevel, err)
			}
			gates, err := parseFeatureGates(featureGates)
			if err != nil {
				return fmt.Errorf("--feature-gates %q: %w", featureGates, err)
			}
			types, err := loadCatalog(catalogFile)
			if err != nil {
				return fmt.Errorf("--catalog %q: %w", catalogFile, err)
			}
			var awsConf operator.AWSConfig
			if cloudProvider == "aws" {
				if awsConf, err = awsFlags.config(cmd.Context()); err != nil {
					return err
				}
			}
			restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig %q: loading the cluster configuration: %w", kubeconfig, err)
			}
			conf := operator.Config{
				CloudProvider: cloudProvider, AWS: awsConf, InstanceTypes: types, KWOKKubelet: kwokKubelet, RegistrationDelay: registrationDelay,
				BatchIdle: batchIdle, BatchMax: batchMax, MinValuesPolicy: policy, SpotToSpotConsolidation: gates[gateSpotToSpot], NominatedNodeHints: hints,
				MetricsAddr: metricsAddr, HealthAddr: healthAddr, LeaderElection: leaderElect, LeaderElectionNamespace: leaderNamespace,
				Logger: zap.New(zap.Level(level), zap.JSONEncoder()), Version: resolvedVersion(),
			}
			scale.apply(&conf)
			return operator.Run(ctrl.SetupSignalHandler(), restConfig, conf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", envDefault("KUBECONFIG", ""), "kubeconfig file (env KUBECONFIG; default: in-cluster)")
	f.StringVar(&cloudProvider, "cloud-provider", envDefault("CLOUD_PROVIDER", "kwok"), "cloud provider: kwok or aws (env CLOUD_PROVIDER)")
	awsFlags.register(f)
	f.StringVar(&catalogFile, "catalog", envDefault("INSTANCE_TYPES_FILE_PATH", ""), "instance-type catalog for the kwok provider (env INSTANCE_TYPES_FILE_PATH; default: the embedded AWS-like catalog)")
	f.DurationVar(&batchIdle, "batch-idle-duration", durationEnv("BATCH_IDLE_DURATION", time.Second), "a provisioning window closes after this long without new pending pods (env BATCH_IDLE_DURATION)")
	f.DurationVar(&batchMax, "batch-max-duration", durationEnv("BATCH_MAX_DURATION", 10*time.Second), "a provisioning window closes after this long at most (env BATCH_MAX_DURATION)")
	scale.register(f)
	f.BoolVar(&hints, "nominated-node-hints", boolEnv("NOMINATED_NODE_HINTS", false), "set status.nominatedNodeName on the pods planned onto a registering node, so kube-scheduler tries it first and keeps their room; costs kube-scheduler time for every hinted pod at every attempt, so off for large clusters (env NOMINATED_NODE_HINTS)")
	f.StringVar(&featureGates, "feature-gates", envDefault("FEATURE_GATES", ""), "comma-separated NAME=true|false (env FEATURE_GATES): SpotToSpotConsolidation (default false)")
	f.StringVar(&minValues, "min-values-policy", envDefault("MIN_VALUES_POLICY", string(sched.MinValuesStrict)), "Strict or BestEffort (env MIN_VALUES_POLICY)")
	f.StringVar(&metricsAddr, "metrics-bind-address", envDefault("METRICS_BIND_ADDRESS", ":8080"), "Prometheus metrics address, 0 to disable (env METRICS_BIND_ADDRESS)")
	f.StringVar(&healthAddr, "health-probe-bind-address", envDefault("HEALTH_PROBE_BIND_ADDRESS", ":8081"), "/healthz and /readyz address, 0 to disable (env HEALTH_PROBE_BIND_ADDRESS)")
	f.BoolVar(&leaderElect, "leader-elect", boolEnv("LEADER_ELECT", true), "elect a leader among replicas (env LEADER_ELECT)")
	f.StringVar(&leaderNamespace, "leader-election-namespace", envDefault("LEADER_ELECTION_NAMESPACE", "kube-system"), "namespace of the leader-election lease (env LEADER_ELECTION_NAMESPACE)")
	f.BoolVar(&kwokKubelet, "kwok-kubelet", boolEnv("KWOK_KUBELET", true), "emulate the kubelet of kwok nodes: Ready, pods Running (env KWOK_KUBELET)")
	f.DurationVar(&registrationDelay, "kwok-registration-delay", durationEnv("KWOK_REGISTRATION_DELAY", 0), "how long a kwok node takes to turn Ready (env KWOK_REGISTRATION_DELAY)")
	f.StringVar(&logLevel, "log-level", envDefault("LOG_LEVEL", "info"), "debug, info or error (env LOG_LEVEL)")
	return cmd
}

// scaleOptions are the flags that size the controller for large clusters:
// the API client's rate limit, the informers' resync and the controllers'
// workers.
type scaleOptions struct {
	qps     float32
	burst   int
	workers int
	resync  time.Duration
}

func (o *scaleOptions) register(f *pflag.FlagSet) {
	f.Float32Var(&o.qps, "kube-client-qps", float32Env("KUBE_CLIENT_QPS", operator.DefaultKubeClientQPS), "requests per second to the API server, sustained (env KUBE_CLIENT_QPS)")
	f.IntVar(&o.burst, "kube-client-burst", intEnv("KUBE_CLIENT_BURST", operator.DefaultKubeClientBurst), "requests to the API server allowed at once before --kube-client-qps paces them (env KUBE_CLIENT_BURST)")
	f.IntVar(&o.workers, "controller-workers", intEnv("CONTROLLER_WORKERS", operator.DefaultControllerWorkers), "objects each controller reconciles at once: NodeClaim launches and terminations, hints, NodePool and NodeClass status, the kwok kubelet (env CONTROLLER_WORKERS)")
	f.DurationVar(&o.resync, "informer-resync-period", durationEnv("INFORMER_RESYNC_PERIOD", 10*time.Hour), "how often the informers replay every object they hold to the controllers, without reading the API; 0 never (env INFORMER_RESYNC_PERIOD; default: controller-runtime's)")
}

// validate names the flag at fault.
func (o *scaleOptions) validate() error {
	if o.qps <= 0 || math.IsInf(float64(o.qps), 0) || math.IsNaN(float64(o.qps)) {
		return fmt.Errorf("--kube-client-qps %v: want a number above 0", o.qps)
	}
	if float64(o.burst) < math.Ceil(float64(o.qps)) { // in floats: a huge QPS must not wrap
		return fmt.Errorf("--kube-client-burst %d: want at least --kube-client-qps %v (rounded up)", o.burst, o.qps)
	}
	if o.workers < 1 {
		return fmt.Errorf("--controller-workers %d: want at least 1", o.workers)
	}
	if o.resync < 0 {
		return fmt.Errorf("--informer-resync-period %s: want 0 (never) or more", o.resync)
	}
	return nil
}

// apply sets the validated flags on conf.
func (o *scaleOptions) apply(conf *operator.Config) {
	conf.KubeClientQPS, conf.KubeClientBurst, conf.ControllerWorkers = o.qps, o.burst, o.workers
	resync := o.resync
	conf.InformerResync = &resync
}

// durationEnv and boolEnv parse an environment default; a malformed value
// is reported when flags are parsed, by making the default unusable.
func durationEnv(name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s=%q is not a duration\n", name, v)
		os.Exit(1)
	}
	return d
}

func float32Env(name string, def float32) float32 {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 32)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s=%q is not a number\n", name, v)
		os.Exit(1)
	}
	return float32(f)
}

func intEnv(name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s=%q is not an integer\n", name, v)
		os.Exit(1)
	}
	return n
}

func boolEnv(name string, def bool) bool {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s=%q is not a boolean\n", name, v)
		os.Exit(1)
	}
	return b
}

// Feature gates Nodewright knows, as Karpenter names them.
const gateSpotToSpot = "SpotToSpotConsolidation"

// parseFeatureGates reads "A=true,B=false" into a map; an unknown gate or a
// value other than true/false is an error.
func parseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	if strings.TrimSpace(s) == "" {
		return gates, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=true or NAME=false", part)
		}
		if name != gateSpotToSpot {
			return nil, fmt.Errorf("unknown feature gate %q (known: %s)", name, gateSpotToSpot)
		}
		on, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", name, value)
		}
		gates[name] = on
	}
	return gates, nil
}
