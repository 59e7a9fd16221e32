// Package faults decorates any CloudProvider with injected faults at seeded
// rates, for chaos runs (the simulator's, and tests): Create answers
// insufficient capacity, throttling, a server error or a timeout without
// launching, or launches and then loses its answer; Delete, Get and List
// fail with transient errors. The same seed and the same sequence of calls
// inject the same faults.
//
//	p, err := faults.New(provider, faults.Rates{LostResponse: 0.05, Throttled: 0.05}, rand.New(rand.NewPCG(seed, 0)))
//	...
//	p.Counts() // {"lost-response": 3, "throttled": 4}
//
// Injected errors are *Error values (errors.As), of the kind they count as;
// insufficient capacity is also a cloudprovider.InsufficientCapacityError
// and a timeout wraps context.DeadlineExceeded.
package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Fault kinds: the keys of Counts and the Kind of an *Error.
const (
	// InsufficientCapacity: Create refuses, launching nothing, naming the
	// offering the NodeClaim would most likely have got (its cheapest
	// available one), which the core then avoids for a while.
	InsufficientCapacity = "insufficient-capacity"
	// Throttled: Create is refused for the caller's request rate.
	Throttled = "throttled"
	// ServerError: Create fails on the cloud's side (a 5xx).
	ServerError = "server-error"
	// Timeout: Create runs into its deadline before an answer.
	Timeout = "timeout"
	// LostResponse: Create launches the instance, then the caller gets an
	// error instead of the answer.
	LostResponse = "lost-response"
	// DeleteError, GetError and ListError: a transient failure of the
	// call, which did nothing.
	DeleteError = "delete-error"
	GetError    = "get-error"
	ListError   = "list-error"
)

// Rates are the probabilities, each within [0, 1], that a call meets a
// fault. A Create meets at most one: its five rates must add up to at most
// 1.
type Rates struct {
	InsufficientCapacity, Throttled, ServerError, Timeout, LostResponse float64
	Delete, Get, List                                                   float64
}

// validate names the first rate out of bounds.
func (r Rates) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"InsufficientCapacity", r.InsufficientCapacity}, {"Throttled", r.Throttled}, {"ServerError", r.ServerError},
		{"Timeout", r.Timeout}, {"LostResponse", r.LostResponse}, {"Delete", r.Delete}, {"Get", r.Get}, {"List", r.List},
	} {
		if !(f.v >= 0 && f.v <= 1) {
			return fmt.Errorf("faults: rates.%s = %v: must be within [0, 1]", f.name, f.v)
		}
	}
	if sum := r.InsufficientCapacity + r.Throttled + r.ServerError + r.Timeout + r.LostResponse; sum > 1 {
		return fmt.Errorf("faults: the Create rates add up to %v: must be at most 1", sum)
	}
	return nil
}

// Error is an injected fault.
type Error struct {
	// Kind is one of the fault kinds above.
	Kind string
	// Method is the CloudProvider method that failed.
	Method string
	err    error
}

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// IsInjected reports whether err is (or wraps) an injected fault.
func IsInjected(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Provider is a CloudProvider with injected faults. It is safe for
// concurrent use; the draws happen in the order calls arrive.
type Provider struct {
	inner cloudprovider.CloudProvider

	mu     sync.Mutex
	rates  Rates
	rng    *rand.Rand
	counts map[string]int
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New wraps inner with faults at rates, drawn from rng (seed it for
// replayable runs).
func New(inner cloudprovider.CloudProvider, rates Rates, rng *rand.Rand) (*Provider, error) {
	if inner == nil {
		return nil, errors.New("faults: no cloud provider to wrap")
	}
	if rng == nil {
		return nil, errors.New("faults: rng is required (a seeded *rand.Rand)")
	}
	if err := rates.validate(); err != nil {
		return nil, err
	}
	return &Provider{inner: inner, rates: rates, rng: rng, counts: map[string]int{}}, nil
}

// SetRates changes the rates from the next call on (zero Rates: no more
// faults, e.g. to let a run settle).
func (p *Provider) SetRates(rates Rates) error {
	if err := rates.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rates = rates
	return nil
}

// Counts are the faults injected so far, by kind.
func (p *Provider) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// draw picks the fault a call meets, "" for none, from one draw: kinds
// and rates in order, each taking its slice of [0, 1). With every rate 0
// nothing is drawn, so a method without faults leaves the sequence of the
// others alone.
func (p *Provider) draw(kinds []string, rates []float64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.ContainsFunc(rates, func(r float64) bool { return r > 0 }) {
		return ""
	}
	u := p.rng.Float64()
	for i, r := range rates {
		if u < r {
			return kinds[i]
		}
		u -= r
	}
	return ""
}

func (p *Provider) count(kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[kind]++
}

func injected(kind, method string, err error) error {
	return &Error{Kind: kind, Method: method, err: err}
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return p.inner.Name() }

// NodeClasses implements cloudprovider.CloudProvider.
func (p *Provider) NodeClasses() []schema.GroupKind { return p.inner.NodeClasses() }

// GetInstanceTypes implements cloudprovider.CloudProvider (no faults).
func (p *Provider) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*catalog.InstanceType, error) {
	return p.inner.GetInstanceTypes(ctx, np)
}

// IsDrifted implements cloudprovider.CloudProvider (no faults).
func (p *Provider) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return p.inner.IsDrifted(ctx, nc)
}

// Create implements cloudprovider.CloudProvider, meeting at most one
// fault.
func (p *Provider) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	r := p.rates
	p.mu.Unlock()
	kind := p.draw([]string{InsufficientCapacity, Throttled, ServerError, Timeout, LostResponse},
		[]float64{r.InsufficientCapacity, r.Throttled, r.ServerError, r.Timeout, r.LostResponse})
	switch kind {
	case InsufficientCapacity:
		refused, err := p.likelyOffering(ctx, nc)
		if err != nil {
			return nil, err
		}
		p.count(kind)
		var offerings []cloudprovider.Offering
		msg := fmt.Sprintf("launching nodeclaim %s: no capacity (injected)", nc.Name)
		if refused != nil {
			offerings = append(offerings, *refused)
			msg = fmt.Sprintf("launching nodeclaim %s: no capacity for %s (injected)", nc.Name, refused)
		}
		return nil, injected(kind, "Create", cloudprovider.NewInsufficientCapacityError(errors.New(msg), offerings...))
	case Throttled:
		p.count(kind)
		return nil, injected(kind, "Create", fmt.Errorf("launching nodeclaim %s: request limit exceeded, throttled (injected)", nc.Name))
	case ServerError:
		p.count(kind)
		return nil, injected(kind, "Create", fmt.Errorf("launching nodeclaim %s: internal server error, status 500 (injected)", nc.Name))
	case Timeout:
		p.count(kind)
		return nil, injected(kind, "Create", fmt.Errorf("launching nodeclaim %s (injected): %w", nc.Name, context.DeadlineExceeded))
	case LostResponse:
		launched, err := p.inner.Create(ctx, nc)
		if err != nil {
			return nil, err // nothing launched: nothing to lose
		}
		p.count(kind)
		return nil, injected(kind, "Create", fmt.Errorf("launching nodeclaim %s: the answer was lost after instance %s launched (injected)", nc.Name, launched.Status.ProviderID))
	}
	return p.inner.Create(ctx, nc)
}

// likelyOffering is the NodeClaim's cheapest available offering among
// its provider's instance types (the one a launch would most likely get),
// or nil when none fits.
func (p *Provider) likelyOffering(ctx context.Context, nc *karpv1.NodeClaim) (*cloudprovider.Offering, error) {
	pool := &karpv1.NodePool{}
	pool.Name = nc.Labels[karpv1.LabelNodePool]
	pool.Spec.Template.Spec.NodeClassRef = nc.Spec.NodeClassRef
	types, err := p.inner.GetInstanceTypes(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: instance types: %w", nc.Name, err)
	}
	reqs, err := requirement.FromAPI(nc.Spec.Requirements)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: spec.requirements: %w", nc.Name, err)
	}
	zones, zoneSet := reqs.Get(corev1.LabelTopologyZone)
	capacityTypes, ctSet := reqs.Get(karpv1.LabelCapacityType)
	type pick struct {
		it *catalog.InstanceType
		o  catalog.Offering
	}
	var picks []pick
	for _, it := range types {
		if !it.Holds(nc.Spec.Resources.Requests) || reqs.Intersects(requirement.FromLabels(it.Labels)) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && (!zoneSet || zones.Has(o.Zone)) && (!ctSet || capacityTypes.Has(o.CapacityType)) {
				picks = append(picks, pick{it, o})
			}
		}
	}
	if len(picks) == 0 {
		return nil, nil
	}
	best := slices.MinFunc(picks, func(a, b pick) int {
		return cmp.Or(cmp.Compare(a.o.Price, b.o.Price), cmp.Compare(a.it.Name, b.it.Name), cmp.Compare(a.o.Zone, b.o.Zone), cmp.Compare(a.o.CapacityType, b.o.CapacityType))
	})
	return &cloudprovider.Offering{InstanceType: best.it.Name, Zone: best.o.Zone, CapacityType: best.o.CapacityType}, nil
}

// Delete implements cloudprovider.CloudProvider.
func (p *Provider) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	p.mu.Lock()
	r := p.rates.Delete
	p.mu.Unlock()
	if p.draw([]string{DeleteError}, []float64{r}) != "" {
		p.count(DeleteError)
		return injected(DeleteError, "Delete", fmt.Errorf("terminating the instance of nodeclaim %s: internal server error, status 500 (injected)", nc.Name))
	}
	return p.inner.Delete(ctx, nc)
}

// Get implements cloudprovider.CloudProvider.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	r := p.rates.Get
	p.mu.Unlock()
	if p.draw([]string{GetError}, []float64{r}) != "" {
		p.count(GetError)
		return nil, injected(GetError, "Get", fmt.Errorf("getting instance %s: internal server error, status 500 (injected)", providerID))
	}
	return p.inner.Get(ctx, providerID)
}

// List implements cloudprovider.CloudProvider.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	p.mu.Lock()
	r := p.rates.List
	p.mu.Unlock()
	if p.draw([]string{ListError}, []float64{r}) != "" {
		p.count(ListError)
		return nil, injected(ListError, "List", errors.New("listing instances: internal server error, status 500 (injected)"))
	}
	return p.inner.List(ctx)
}
