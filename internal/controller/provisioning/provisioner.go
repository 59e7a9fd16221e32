package provisioning

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Event reasons on pods, as Karpenter's.
const (
	ReasonNominated        = "Nominated"
	ReasonFailedScheduling = "FailedScheduling"
)

// Options configure a Provisioner.
type Options struct {
	// NominationTTL is how long a placed pod is not provisioned for again
	// while kube-scheduler binds it (Karpenter: max(2 × batch max, 10 s)).
	NominationTTL time.Duration
	// MinValuesPolicy is passed to the solver.
	MinValuesPolicy sched.MinValuesPolicy
	// Unavailable offerings (refused launches) are avoided; nil: none.
	Unavailable *state.UnavailableOfferings
	// Metrics records nodeclaims created and solve durations; nil: none.
	Metrics *metrics.Metrics
	// Clock times solves for the metric; nil: the real clock.
	Clock clock.PassiveClock
	// CreateWorkers is how many NodeClaims of one decision are created at
	// once (0 or 1: one after another).
	CreateWorkers int
}

// Provisioner makes one provisioning decision at a time.
type Provisioner struct {
	kube     client.Client
	provider cloudprovider.CloudProvider
	cluster  *state.Cluster
	recorder record.EventRecorder
	// events publishes the pod events, deduplicated.
	events *podEvents
	opts   Options
}

// NewProvisioner wires a provisioner.
func NewProvisioner(kube client.Client, provider cloudprovider.CloudProvider, cluster *state.Cluster, recorder record.EventRecorder, opts Options) *Provisioner {
	if opts.NominationTTL == 0 {
		opts.NominationTTL = 20 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Provisioner{kube: kube, provider: provider, cluster: cluster, recorder: recorder, events: newPodEvents(recorder, opts.Clock), opts: opts}
}

// ErrNotSynced is the answer while the cluster model has not synced with
// the API server: it may miss NodeClaims, and deciding on it could buy the
// same pods twice. Ask again shortly.
var ErrNotSynced = errors.New("the cluster model has not synced with the API server yet; deciding later")

// Provision decides for the pods pending now and creates the NodeClaims the
// plan calls for. It returns the NodeClaims created, and ErrNotSynced
// (creating nothing) while the cluster model is incomplete.
func (p *Provisioner) Provision(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	if !p.cluster.Synced() {
		return nil, ErrNotSynced
	}
	return p.provision(ctx, p.cluster.Snapshot())
}

// ProvisionFor plans new places for the pods of a node about to go (an
// interrupted instance) as if they were pending, ahead of their eviction:
// the node takes nothing new, the pods go to room elsewhere or to new
// NodeClaims, which it creates and returns. Like Provision it answers
// ErrNotSynced while the cluster model is incomplete.
func (p *Provisioner) ProvisionFor(ctx context.Context, node string, pods []*corev1.Pod) ([]*karpv1.NodeClaim, error) {
	if !p.cluster.Synced() {
		return nil, ErrNotSynced
	}
	snap := p.cluster.Snapshot()
	snap.Pending, snap.Evicting = nil, nil
	for _, pod := range pods {
		moved := pod.DeepCopy()
		moved.Spec.NodeName = ""
		snap.Pending = append(snap.Pending, moved)
	}
	for i := range snap.Nodes {
		if snap.Nodes[i].Name == node {
			snap.Nodes[i].MarkedForDeletion = true
		}
	}
	return p.provision(ctx, snap)
}

func (p *Provisioner) provision(ctx context.Context, snap state.Snapshot) ([]*karpv1.NodeClaim, error) {
	if len(snap.Pending) == 0 && len(snap.Evicting) == 0 {
		return nil, nil
	}
	plan, byName, err := p.solve(ctx, snap)
	if err != nil {
		return nil, err
	}
	created, err := p.create(ctx, plan.NodeClaims, byName)
	for _, placed := range plan.Existing {
		p.cluster.Nominate(placed.Pods, placed.Node, p.opts.NominationTTL)
		for _, pod := range placed.Pods {
			p.events.Eventf(pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: node/%s", placed.Node)
		}
	}
	running := make(map[types.UID]bool, len(snap.Evicting))
	for _, e := range snap.Evicting {
		running[e.UID] = true
	}
	for _, u := range plan.Unschedulable {
		if running[u.Pod.UID] {
			continue // still running where it is: no FailedScheduling on it
		}
		p.events.Eventf(u.Pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Failed to schedule pod, %s", u.Reason)
	}
	return created, err
}

// Plan decides for the pods pending now and creates nothing: a dry run
// (`nodewright explain pod`).
func (p *Provisioner) Plan(ctx context.Context) (sched.Plan, error) {
	if !p.cluster.Synced() {
		return sched.Plan{}, ErrNotSynced
	}
	plan, _, err := p.solve(ctx, p.cluster.Snapshot())
	return plan, err
}

// solve runs the solver on a snapshot with the NodePools it may use. The
// NodeClaims still launching are in-flight capacity: pods go onto the room
// they were sized for before anything new is bought (a launch that fails
// for one pool holds back only the pods planned onto it).
func (p *Provisioner) solve(ctx context.Context, snap state.Snapshot) (sched.Plan, map[string]*karpv1.NodePool, error) {
	pools, byName, err := p.Pools(ctx, snap)
	if err != nil {
		return sched.Plan{}, nil, err
	}
	in := snap.ProvisioningInput(pools)
	in.MinValuesPolicy = p.opts.MinValuesPolicy
	if p.opts.Unavailable != nil {
		in.Unavailable = p.opts.Unavailable.IsUnavailable
	}
	start := p.opts.Clock.Now()
	plan := sched.Solve(in)
	p.opts.Metrics.ObserveScheduling("provisioner", p.opts.Clock.Since(start).Seconds())
	return plan, byName, nil
}

// Pools gathers the NodePools this provider serves that provisioning may
// launch from (state.Snapshot.Pools), with their instance types and usage.
// A pool whose instance types cannot be read is skipped, as in Karpenter.
// Disruption plans its replacements from the same pools.
func (p *Provisioner) Pools(ctx context.Context, snap state.Snapshot) ([]sched.NodePool, map[string]*karpv1.NodePool, error) {
	return snap.Pools(func(np *karpv1.NodePool) ([]*catalog.InstanceType, bool, error) {
		if !cloudprovider.Manages(p.provider, np.Spec.Template.Spec.NodeClassRef) {
			return nil, false, nil
		}
		its, err := p.provider.GetInstanceTypes(ctx, np)
		if err != nil {
			return nil, false, ctx.Err()
		}
		return its, true, nil
	})
}
