package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Collector runs garbage-collection rounds.
type Collector struct {
	kube     client.Client
	provider cloudprovider.CloudProvider
	clock    clock.Clock
	minAge   time.Duration
	log      logr.Logger
	metrics  *metrics.Metrics
}

// New wires a collector; minAge is the grace given to unowned instances
// (MinInstanceAge unless a test needs less).
func New(kube client.Client, provider cloudprovider.CloudProvider, clk clock.Clock, minAge time.Duration, log logr.Logger, m *metrics.Metrics) *Collector {
	return &Collector{kube: kube, provider: provider, clock: clk, minAge: minAge, log: log, metrics: m}
}

// Collect runs one round and returns what it removed. The provider is
// listed before the NodeClaims, so an instance launched during the round
// is either unlisted or already young; never judged against stale claims.
func (c *Collector) Collect(ctx context.Context) (Decision, error) {
	instances, err := c.provider.List(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("garbage collection: listing instances: %w", err)
	}
	// Read only (the cache's objects are not copied); deletes get copies.
	claimList := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claimList, client.UnsafeDisableDeepCopy); err != nil {
		return Decision{}, fmt.Errorf("garbage collection: listing nodeclaims: %w", err)
	}
	nodeList := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodeList, client.UnsafeDisableDeepCopy); err != nil {
		return Decision{}, fmt.Errorf("garbage collection: listing nodes: %w", err)
	}
	var claims []*karpv1.NodeClaim
	for i := range claimList.Items {
		if cloudprovider.Manages(c.provider, claimList.Items[i].Spec.NodeClassRef) {
			claims = append(claims, &claimList.Items[i])
		}
	}
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}

	d := Decide(instances, claims, nodes, c.clock.Now(), c.minAge)
	var errs []error
	for _, in := range d.Instances {
		c.log.Info("terminating an instance no nodeclaim owns", "providerID", in.Status.ProviderID, "launchedFor", in.Name)
		if err := c.terminate(ctx, in, nodes); err != nil {
			errs = append(errs, err)
		}
	}
	for _, nc := range d.NodeClaims {
		c.log.Info("deleting a nodeclaim whose instance is gone", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID)
		if err := c.kube.Delete(ctx, nc.DeepCopy()); err != nil {
			if client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("garbage collecting nodeclaim %s: %w", nc.Name, err))
			}
			continue
		}
		c.metrics.NodeClaimDisrupted(nc, metrics.ReasonGarbageCollected)
	}
	return d, errors.Join(errs...)
}

// terminate deletes an orphan instance and any Node that registered for it.
func (c *Collector) terminate(ctx context.Context, in *karpv1.NodeClaim, nodes []*corev1.Node) error {
	if err := c.provider.Delete(ctx, in); err != nil && !cloudprovider.IsNodeClaimNotFoundError(err) {
		return fmt.Errorf("garbage collecting instance %s: %w", in.Status.ProviderID, err)
	}
	for _, n := range nodes {
		if n.Spec.ProviderID == in.Status.ProviderID && n.DeletionTimestamp == nil {
			if err := c.kube.Delete(ctx, n.DeepCopy()); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("garbage collecting node %s of instance %s: %w", n.Name, in.Status.ProviderID, err)
			}
		}
	}
	return nil
}

// Intervals between rounds: quick at first (a restart is when orphans are
// most likely), then every 2 minutes, as Karpenter.
const (
	FastInterval = 10 * time.Second
	FastRounds   = 20
	SlowInterval = 2 * time.Minute
)

// Interval is the wait after round (counted from 1).
func Interval(round int) time.Duration {
	if round < FastRounds {
		return FastInterval
	}
	return SlowInterval
}

// After is the wait after round ended with err: a failed round (the cloud
// List or an API write refused) is tried again at the fast interval rather
// than leaving a leaked instance running for another slow one.
func After(round int, err error) time.Duration {
	if err != nil {
		return FastInterval
	}
	return Interval(round)
}

// Runnable runs Collect on the leader until ctx ends.
func (c *Collector) Runnable() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		for round := 1; ; round++ {
			_, err := c.Collect(ctx)
			if err != nil {
				c.log.Error(err, "garbage collection")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-c.clock.After(After(round, err)):
			}
		}
	})
}
