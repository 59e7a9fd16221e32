package simulator

import (
	"context"
	"math/rand/v2"
	"slices"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/pkg/cloudprovider/faults"
)

// crashGate stands in front of the cloud provider Nodewright uses: once
// Nodewright has crashed, no call reaches the cloud; before that every
// launch or termination may be the crash point of an armed crash.
//
// raw, when cloud faults are on, is the provider without them: a launch
// retried for a NodeClaim that already has an instance (its first answer
// was lost) gets that instance from the cloud, as EC2 answers a CreateFleet
// retried with the same ClientToken, not a fresh fault.
type crashGate struct {
	cloudprovider.CloudProvider
	in  *injector
	raw cloudprovider.CloudProvider
}

func (g *crashGate) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if err := g.in.op("cloud create " + nc.Name); err != nil {
		return nil, err
	}
	if g.raw != nil {
		instances, err := g.raw.List(ctx)
		if err == nil && slices.ContainsFunc(instances, func(i *karpv1.NodeClaim) bool { return i.Name == nc.Name }) {
			return g.raw.Create(ctx, nc)
		}
	}
	return g.CloudProvider.Create(ctx, nc)
}

func (g *crashGate) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	if err := g.in.op("cloud delete " + nc.Name); err != nil {
		return err
	}
	return g.CloudProvider.Delete(ctx, nc)
}

// cloudKinds are the report's names of the fault decorator's kinds.
var cloudKinds = map[string]string{
	faults.InsufficientCapacity: FaultCloudICE, faults.Throttled: FaultCloudThrottle, faults.ServerError: FaultCloudServerError,
	faults.Timeout: FaultCloudTimeout, faults.LostResponse: FaultCloudLaunchLost,
	faults.DeleteError: FaultCloudCallError, faults.GetError: FaultCloudCallError, faults.ListError: FaultCloudCallError,
}

// cloudRates are the decorator's rates for CloudFaults: a termination, get
// or list fails (throttled, 5xx or timed out) at the three transient rates
// together. lostByCloud: the cloud itself loses launch answers (the fake
// AWS's CreateFleet), so the decorator does not.
func cloudRates(c *CloudFaults, lostByCloud bool) faults.Rates {
	transient := c.ThrottleRate + c.ServerErrorRate + c.TimeoutRate
	r := faults.Rates{InsufficientCapacity: c.InsufficientCapacityRate, Throttled: c.ThrottleRate, ServerError: c.ServerErrorRate,
		Timeout: c.TimeoutRate, LostResponse: c.LaunchLostRate, Delete: transient, Get: transient, List: transient}
	if lostByCloud {
		r.LostResponse = 0
	}
	return r
}

// wrapProvider is operator.Dependencies.WrapProvider under faults: the
// crash gate outside, the cloud-fault decorator (pkg/cloudprovider/faults)
// inside. Each restart wraps a new provider; the decorators share one
// seeded generator, and their counts are summed.
func (in *injector) wrapProvider(p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
	gate := &crashGate{in: in}
	if c := in.spec.Cloud; c != nil {
		gate.raw = p
		if in.cloudRNG == nil {
			in.cloudRNG = rand.New(rand.NewPCG(in.seed, 0x636c6f7564))
		}
		decorated, err := faults.New(p, cloudRates(c, in.lostByCloud), in.cloudRNG)
		if err != nil {
			in.err = err // the rates were checked with the scenario: not expected
		} else {
			in.decorators = append(in.decorators, decorated)
			p = decorated
		}
	}
	gate.CloudProvider = p
	return gate
}

// cloudCounts are the cloud faults injected so far, by the report's kinds.
func (in *injector) cloudCounts() map[string]int {
	out := map[string]int{}
	for _, d := range in.decorators {
		for kind, n := range d.Counts() {
			if k, ok := cloudKinds[kind]; ok {
				out[k] += n
			}
		}
	}
	return out
}
