package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/controller/garbagecollection"
	"github.com/nodewright/nodewright/internal/controller/nodeclaim"
	"github.com/nodewright/nodewright/internal/controller/nodepool"
	"github.com/nodewright/nodewright/internal/controller/nomination"
	"github.com/nodewright/nodewright/internal/controller/provisioning"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/internal/controller/watch"
	pdisruption "github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	cpmetrics "github.com/nodewright/nodewright/pkg/cloudprovider/metrics"
	"github.com/nodewright/nodewright/providers/aws/interruption"
	"github.com/nodewright/nodewright/providers/kwok"
)

// Components are Nodewright's controllers built for one client and clock.
// Run serves them with controller-runtime against an API server; the
// simulator serves the very same components on its in-memory cluster.
type Components struct {
	// Cluster is the model the provisioner decides on; Observe keeps it
	// current.
	Cluster *state.Cluster
	// Controllers are the reconcilers and what wakes them.
	Controllers []watch.Controller
	// Provisioner decides when Batcher closes a window.
	Provisioner *provisioning.Provisioner
	Batcher     *provisioning.Batcher
	// GarbageCollector runs rounds on its own schedule.
	GarbageCollector *garbagecollection.Collector
	// KWOK is the kwok provider (scenario steps refuse its offerings).
	KWOK *kwok.Provider
	// Disruption makes and carries out disruption decisions, one pass at
	// a time.
	Disruption *disruption.Loop
	// Interruption handles the aws provider's interruption queue (nil
	// without one).
	Interruption *interruption.Controller
	// Runnables are the provider's own loops (the aws provider's launch
	// template cleanup).
	Runnables []manager.Runnable
}

// Dependencies are what the components act through.
type Dependencies struct {
	Kube client.Client
	// APIReader, when set, reads the API server uncached (the manager's
	// APIReader), where a lagging cache would mislead a controller.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Metrics and CloudProviderMetrics may be nil: nothing is recorded.
	Metrics              *metrics.Metrics
	CloudProviderMetrics *cpmetrics.Metrics
	// Cloud, when set, is the client the kwok provider and its kubelet
	// write through instead of Kube: they play the cloud and the nodes'
	// kubelets, not Nodewright (the simulator injects API faults into
	// Nodewright's writes only).
	Cloud client.Client
	// WrapProvider, when set, wraps the cloud provider the controllers use
	// (the simulator injects cloud faults through it).
	WrapProvider func(cloudprovider.CloudProvider) cloudprovider.CloudProvider
}

// IndexFields registers the field indexes the controllers look objects up
// by; call it before the client that serves them is used.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	for _, index := range []func(context.Context, client.FieldIndexer) error{nodeclaim.IndexFields, nomination.IndexFields, termination.IndexFields, interruption.IndexFields} {
		if err := index(ctx, indexer); err != nil {
			return err
		}
	}
	return nil
}

// Build wires the components from conf (conf.Clock must be set).
func Build(conf Config, deps Dependencies) (*Components, error) {
	kube, clk, m := deps.Kube, conf.Clock, deps.Metrics
	cloudKube := deps.Cloud
	if cloudKube == nil {
		cloudKube = kube
	}
	kwokProvider := kwok.New(cloudKube, conf.InstanceTypes)
	for _, o := range conf.KWOKRefusedOfferings {
		kwokProvider.RefuseOffering(o)
	}
	if conf.KWOKServesEC2NodeClasses {
		kwokProvider.ServeEC2NodeClasses()
	}
	unavailable := state.NewUnavailableOfferings(clk, state.DefaultUnavailableTTL)
	var provider cloudprovider.CloudProvider = kwokProvider
	var providerControllers []watch.Controller
	var queue interruption.SQS
	var runnables []manager.Runnable
	switch conf.CloudProvider {
	case "kwok":
	case "aws":
		awsProvider, classes, err := buildAWS(conf, kube, unavailable.IsUnavailable)
		if err != nil {
			return nil, err
		}
		provider = awsProvider
		providerControllers = classes.Controllers()
		runnables = append(runnables, awsProvider.TemplateCleanup(5*time.Minute))
		if conf.AWS.InterruptionQueue != "" {
			queue = sqs.NewFromConfig(conf.AWS.SDK)
		}
	default:
		return nil, fmt.Errorf("cloud provider %q: want kwok or aws", conf.CloudProvider)
	}
	if deps.WrapProvider != nil {
		provider = deps.WrapProvider(provider)
	}
	if deps.CloudProviderMetrics != nil {
		provider = deps.CloudProviderMetrics.Decorate(provider)
	}
	cluster := state.NewCluster(clk)

	c := &Components{Cluster: cluster, KWOK: kwokProvider, Runnables: runnables}
	c.Controllers = append(c.Controllers, providerControllers...)
	lifecycle := nodeclaim.New(kube, provider, clk, unavailable, deps.Recorder, m)
	if conf.NominatedNodeHints {
		hinter := nomination.New(kube, cluster, conf.WriteWorkers, conf.Logger.WithName("nomination"))
		c.Controllers = append(c.Controllers, hinter.Controllers()...)
		lifecycle = lifecycle.WithHinter(hinter)
	}
	c.Controllers = append(c.Controllers, lifecycle.Controllers()...)
	c.Controllers = append(c.Controllers, nodepool.New(kube, clk, m).Controllers()...)
	c.Controllers = append(c.Controllers, termination.New(kube, provider, clk, deps.Recorder, m).WithAPIReader(deps.APIReader).Controllers()...)
	c.Controllers = append(c.Controllers, disruption.NewClaims(kube, provider, cluster, clk, deps.Recorder, m).Controllers()...)
	c.Provisioner = provisioning.NewProvisioner(kube, provider, cluster, deps.Recorder, provisioning.Options{
		NominationTTL: max(2*conf.BatchMax, 10*time.Second), MinValuesPolicy: conf.MinValuesPolicy, Unavailable: unavailable, Metrics: m, Clock: clk,
		CreateWorkers: conf.WriteWorkers,
	})
	policy := pdisruption.DefaultPolicy
	policy.SpotToSpot = conf.SpotToSpotConsolidation
	c.Disruption = disruption.NewLoop(kube, cluster, clk, deps.Recorder, m, conf.Logger.WithName("disruption"), c.Provisioner, disruption.Options{Policy: &policy, APIReader: deps.APIReader, Workers: conf.WriteWorkers})
	if conf.KWOKKubelet {
		c.Controllers = append(c.Controllers, kwok.NewKubelet(cloudKube, clk, kwok.KubeletOptions{RegistrationDelay: conf.RegistrationDelay, HeartbeatInterval: conf.KWOKHeartbeat,
			ProviderIDPrefixes: conf.KWOKKubeletProviderIDPrefixes}).Controllers()...)
	}
	orphanAge := conf.OrphanInstanceAge
	if orphanAge == 0 {
		orphanAge = garbagecollection.MinInstanceAge
	}
	withWorkers(c.Controllers, conf.ControllerWorkers)
	c.GarbageCollector = garbagecollection.New(kube, provider, clk, orphanAge, conf.Logger.WithName("garbagecollection"), m)
	c.Batcher = provisioning.NewBatcher(clk, conf.BatchIdle, conf.BatchMax)
	if queue != nil {
		c.Interruption = interruption.New(kube, queue, replacer{c.Provisioner}, unavailable, deps.Recorder, m, clk, conf.Logger.WithName("interruption"),
			interruption.Options{Queue: conf.AWS.InterruptionQueue, ShortPoll: conf.AWS.ShortPoll}).WithAPIReader(deps.APIReader)
	}
	return c, nil
}

// withWorkers has every controller that does not declare its own Workers
// (the kwok kubelet sizes its own; one that must stay serial declares 1)
// reconcile up to workers objects at once. Each was checked for it: the
// state a reconciler shares across objects is its clients, clock and
// provider (safe for concurrent use) or a map under a mutex (nomination's
// hints, disruption's pod signatures), and controller-runtime never
// reconciles one object twice at once. All of them wait on the API server
// or the cloud: NodeClaim launches and terminations, hints, NodePool and
// NodeClass status.
func withWorkers(controllers []watch.Controller, workers int) {
	for i := range controllers {
		if controllers[i].Workers == 0 {
			controllers[i].Workers = workers
		}
	}
}

// replacer adapts the provisioner to the interruption controller: a
// cluster model not synced yet means "try again".
type replacer struct{ p *provisioning.Provisioner }

func (r replacer) ProvisionFor(ctx context.Context, node string, pods []*corev1.Pod) ([]*karpv1.NodeClaim, error) {
	out, err := r.p.ProvisionFor(ctx, node, pods)
	if errors.Is(err, provisioning.ErrNotSynced) {
		return nil, fmt.Errorf("%w: %w", interruption.ErrTryAgain, err)
	}
	return out, err
}
