package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/state"
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
}

// Provisioner makes one provisioning decision at a time.
type Provisioner struct {
	kube     client.Client
	provider cloudprovider.CloudProvider
	cluster  *state.Cluster
	recorder record.EventRecorder
	opts     Options
}

// NewProvisioner wires a provisioner.
func NewProvisioner(kube client.Client, provider cloudprovider.CloudProvider, cluster *state.Cluster, recorder record.EventRecorder, opts Options) *Provisioner {
	if opts.NominationTTL == 0 {
		opts.NominationTTL = 20 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Provisioner{kube: kube, provider: provider, cluster: cluster, recorder: recorder, opts: opts}
}

// Provision decides for the pods pending now and creates the NodeClaims the
// plan calls for. It returns the NodeClaims created.
func (p *Provisioner) Provision(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	return p.provision(ctx, p.cluster.Snapshot())
}

// ErrLaunching is ProvisionFor's answer while a NodeClaim waits for its
// provider ID: deciding now could buy the same pods twice; ask again.
var ErrLaunching = errors.New("a nodeclaim is still launching; planning again shortly")

// ProvisionFor plans new places for the pods of a node about to go (an
// interrupted instance) as if they were pending, ahead of their eviction:
// the node takes nothing new, the pods go to room elsewhere or to new
// NodeClaims, which it creates and returns.
func (p *Provisioner) ProvisionFor(ctx context.Context, node string, pods []*corev1.Pod) ([]*karpv1.NodeClaim, error) {
	snap := p.cluster.Snapshot()
	snap.Pending = nil
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
	if launching(snap) {
		return nil, ErrLaunching
	}
	return p.provision(ctx, snap)
}

func (p *Provisioner) provision(ctx context.Context, snap state.Snapshot) ([]*karpv1.NodeClaim, error) {
	if len(snap.Pending) == 0 {
		return nil, nil
	}
	if launching(snap) {
		// As Karpenter: a NodeClaim without a provider ID may already have
		// an instance (a restart mid-launch forgets its nominations), so
		// deciding now could buy its pods a second node. Launch is quick;
		// the claim's update triggers the next batch.
		return nil, nil
	}
	plan, byName, err := p.solve(ctx, snap)
	if err != nil {
		return nil, err
	}
	var created []*karpv1.NodeClaim
	var errs []error
	for _, planned := range plan.NodeClaims {
		nc, err := NodeClaimFor(byName[planned.NodePool], planned)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := p.kube.Create(ctx, nc); err != nil {
			errs = append(errs, fmt.Errorf("creating nodeclaim for nodepool %s: %w", planned.NodePool, err))
			continue
		}
		created = append(created, nc)
		p.opts.Metrics.NodeClaimCreated(nc, metrics.ReasonProvisioned)
		p.cluster.UpdateNodeClaim(nc) // count it before the informer does
		p.cluster.Nominate(planned.Pods, nc.Name, p.opts.NominationTTL)
		for _, pod := range planned.Pods {
			p.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: nodeclaim/%s", nc.Name)
		}
	}
	for _, placed := range plan.Existing {
		p.cluster.Nominate(placed.Pods, placed.Node, p.opts.NominationTTL)
		for _, pod := range placed.Pods {
			p.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: node/%s", placed.Node)
		}
	}
	for _, u := range plan.Unschedulable {
		p.recorder.Eventf(u.Pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Failed to schedule pod, %s", u.Reason)
	}
	return created, errors.Join(errs...)
}

// Plan decides for the pods pending now and creates nothing: a dry run
// (`nodewright explain pod`).
func (p *Provisioner) Plan(ctx context.Context) (sched.Plan, error) {
	plan, _, err := p.solve(ctx, p.cluster.Snapshot())
	return plan, err
}

// solve runs the solver on a snapshot with the NodePools it may use.
func (p *Provisioner) solve(ctx context.Context, snap state.Snapshot) (sched.Plan, map[string]*karpv1.NodePool, error) {
	pools, byName, err := p.Pools(ctx, snap)
	if err != nil {
		return sched.Plan{}, nil, err
	}
	in := snap.Input(pools)
	in.MinValuesPolicy = p.opts.MinValuesPolicy
	if p.opts.Unavailable != nil {
		in.Unavailable = p.opts.Unavailable.IsUnavailable
	}
	start := p.opts.Clock.Now()
	plan := sched.Solve(in)
	p.opts.Metrics.ObserveScheduling("provisioner", p.opts.Clock.Since(start).Seconds())
	return plan, byName, nil
}

// Pools gathers the Ready NodePools this provider serves, with their
// instance types and usage: the capacity of their nodes and launched
// NodeClaims. No NodeClaim is still launching when Provision calls it (it
// waits for them), so limits hold across batches. Disruption plans its
// replacements from the same pools.
func (p *Provisioner) Pools(ctx context.Context, snap state.Snapshot) ([]sched.NodePool, map[string]*karpv1.NodePool, error) {
	var out []sched.NodePool
	byName := map[string]*karpv1.NodePool{}
	for _, np := range snap.NodePools {
		if !cloudprovider.Manages(p.provider, np.Spec.Template.Spec.NodeClassRef) {
			continue
		}
		if !meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady) {
			continue // as in Karpenter, only Ready pools launch (see the nodepool controller)
		}
		types, err := p.provider.GetInstanceTypes(ctx, np)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, err
			}
			continue // Karpenter skips a pool whose instance types cannot be read
		}
		out = append(out, sched.NodePool{NodePool: np, InstanceTypes: types, Usage: snap.Usage[np.Name]})
		byName[np.Name] = np
	}
	return out, byName, nil
}

// launching reports whether a NodeClaim still waits for its provider ID.
func launching(snap state.Snapshot) bool {
	for _, claims := range snap.Launching {
		if len(claims) > 0 {
			return true
		}
	}
	return false
}
