package provisioning

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/sched"
)

// DefaultCreateWorkers is how many NodeClaims of one decision the
// controller creates at once unless told otherwise: a decision for
// thousands of pods is one wave of API calls, not a queue of them.
const DefaultCreateWorkers = 20

// create writes the planned NodeClaims, up to opts.CreateWorkers at once.
// Each one created is counted, recorded in the cluster model (before the
// informer brings it) and gets its pods nominated, whatever happens to the
// others. It returns those created, in plan order, and every failure
// joined.
func (p *Provisioner) create(ctx context.Context, planned []sched.NodeClaim, pools map[string]*karpv1.NodePool) ([]*karpv1.NodeClaim, error) {
	claims := make([]*karpv1.NodeClaim, len(planned))
	errs := make([]error, len(planned))
	workqueue.ParallelizeUntil(ctx, max(1, p.opts.CreateWorkers), len(planned), func(i int) {
		claims[i], errs[i] = p.createOne(ctx, planned[i], pools[planned[i].NodePool])
	})
	var created []*karpv1.NodeClaim
	for i, nc := range claims {
		switch {
		case nc != nil:
			created = append(created, nc)
		case errs[i] == nil: // never started: the context ended first
			errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", planned[i].NodePool, context.Cause(ctx))
		}
	}
	return created, errors.Join(errs...)
}

// createOne writes one planned NodeClaim of np and, once it exists, counts
// it, records it and nominates its pods.
func (p *Provisioner) createOne(ctx context.Context, planned sched.NodeClaim, np *karpv1.NodePool) (*karpv1.NodeClaim, error) {
	nc, err := NodeClaimFor(np, planned)
	if err != nil {
		return nil, fmt.Errorf("building nodeclaim for nodepool %s: %w", planned.NodePool, err)
	}
	if err := p.kube.Create(ctx, nc); err != nil {
		return nil, fmt.Errorf("creating nodeclaim for nodepool %s: %w", planned.NodePool, err)
	}
	p.opts.Metrics.NodeClaimCreated(nc, metrics.ReasonProvisioned)
	p.cluster.UpdateNodeClaim(nc) // count it before the informer does
	p.cluster.Nominate(planned.Pods, nc.Name, p.opts.NominationTTL)
	for _, pod := range planned.Pods {
		p.events.Eventf(pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: nodeclaim/%s", nc.Name)
	}
	return nc, nil
}
