package simulator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/pkg/cloudprovider/faults"
)

// errCrashed is what every write and cloud call of a crashed Nodewright
// returns until the engine restarts it: nothing after the crash point
// reaches the API or the cloud. It wraps context.Canceled, as a dying
// process's calls would, so it is not reported as a controller error.
var errCrashed = fmt.Errorf("nodewright crashed (simulated): %w", context.Canceled)

// injector draws the faults of one simulation and counts them by kind. It
// outlives every restart of Nodewright.
//
// The fault of a write or cloud call is drawn from the seed, the call and
// its object, and how many such calls the object has had: not from one
// stream in call order. A controller that loops over a map (in an order
// Go randomises) then still meets the same faults on the same objects, and
// the run stays deterministic.
type injector struct {
	spec   *Faults
	seed   uint64
	counts map[string]int
	// calls counts the draws made for each key.
	calls map[string]uint64
	// events draws the instants of crashes, node failures and
	// interruptions, and the nodes they hit.
	events *rand.Rand
	// A crash is armed by a crash fault: each next write or cloud call is
	// the crash point with probability crashPoint (the instant's end at the
	// latest); from there on Nodewright is dead until the engine restarts
	// it. crashes numbers them.
	armed, dead bool
	crashes     int
	// The cloud faults: the decorators each (re)start wrapped the
	// provider in, drawing from cloudRNG; lostByCloud when the fake AWS
	// loses launch answers itself. err: a decorator could not be built.
	cloudRNG    *rand.Rand
	decorators  []*faults.Provider
	lostByCloud bool
	err         error
}

// crashPoint is the chance that an armed crash happens at a given write
// or cloud call: a crash lands, on average, 8 calls in.
const crashPoint = 1.0 / 8

func newInjector(spec *Faults, seed int64) *injector {
	in := &injector{spec: spec, seed: uint64(seed), counts: map[string]int{}, calls: map[string]uint64{}}
	in.events = rand.New(rand.NewPCG(in.seed, 0x6576656e7473))
	for _, k := range spec.kinds() {
		in.counts[k] = 0
	}
	return in
}

// draw is a number in [0, 1) for the next call under key.
func (in *injector) draw(key string) float64 {
	in.calls[key]++
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(in.seed, h.Sum64()^in.calls[key]*0x9e3779b97f4a7c15)).Float64()
}

// op is called before each write or cloud call Nodewright makes (key
// names it): errCrashed once Nodewright is dead.
func (in *injector) op(key string) error {
	if in.dead {
		return errCrashed
	}
	if in.armed && in.draw(fmt.Sprintf("crash %d %s", in.crashes, key)) < crashPoint {
		in.armed, in.dead = false, true
		return errCrashed
	}
	return nil
}

// arm makes Nodewright die at one of its next writes or cloud calls.
func (in *injector) arm() {
	if in.armed || in.dead {
		return
	}
	in.armed = true
	in.crashes++
}

// apiFault is the fault a write (key names it) gets: "" (none),
// FaultAPIError, FaultAPIConflict (updates and patches only) or
// FaultAPILost.
func (in *injector) apiFault(key string, update bool) string {
	a := in.spec.API
	if a == nil {
		return ""
	}
	r := in.draw("api " + key)
	switch {
	case r < a.ErrorRate:
		return FaultAPIError
	case r < a.ErrorRate+a.ConflictRate:
		if update {
			return FaultAPIConflict
		}
	case r < a.ErrorRate+a.ConflictRate+a.LostRate:
		return FaultAPILost
	}
	return ""
}

// faultClient is the API as Nodewright's controllers see it: its writes
// fail, conflict or lose their answer at the injector's rates, and fail
// once Nodewright has crashed. Reads are the store's.
type faultClient struct {
	client.Client
	in *injector
}

// write performs do under the fault the injector draws for a write of obj.
func (c *faultClient) write(verb string, obj client.Object, update bool, do func() error) error {
	gr := c.groupResource(obj)
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName()
	}
	key := verb + " " + gr.String() + " " + obj.GetNamespace() + "/" + name
	if err := c.in.op(key); err != nil {
		return err
	}
	switch kind := c.in.apiFault(key, update); kind {
	case FaultAPIError:
		c.in.counts[kind]++
		return apierrors.NewInternalError(fmt.Errorf("%s %s: injected fault", verb, obj.GetName()))
	case FaultAPIConflict:
		c.in.counts[kind]++
		return apierrors.NewConflict(gr, obj.GetName(), errors.New("the object has been modified (injected fault); please apply your changes to the latest version and try again"))
	case FaultAPILost:
		c.in.counts[kind]++
		// The write happens; the caller never hears of it, and its copy
		// stays as it sent it.
		sent := obj.DeepCopyObject()
		if err := do(); err != nil {
			return err
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(sent).Elem())
		return apierrors.NewServerTimeout(gr, verb, 1)
	}
	return do()
}

func (c *faultClient) groupResource(obj client.Object) schema.GroupResource {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return schema.GroupResource{}
	}
	if m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
}

func (c *faultClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.write("create", obj, false, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *faultClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.write("update", obj, true, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *faultClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.write("patch", obj, true, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c *faultClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.write("delete", obj, false, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c *faultClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.write("deletecollection", obj, false, func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c *faultClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *faultClient) SubResource(name string) client.SubResourceClient {
	return &faultSubResource{SubResourceClient: c.Client.SubResource(name), c: c, name: name}
}

// faultSubResource faults the writes of a subresource (status, eviction).
type faultSubResource struct {
	client.SubResourceClient
	c    *faultClient
	name string
}

func (r *faultSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return r.c.write("create "+r.name, obj, false, func() error { return r.SubResourceClient.Create(ctx, obj, sub, opts...) })
}

func (r *faultSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return r.c.write("update "+r.name, obj, true, func() error { return r.SubResourceClient.Update(ctx, obj, opts...) })
}

func (r *faultSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return r.c.write("patch "+r.name, obj, true, func() error { return r.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}
