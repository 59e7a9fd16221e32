package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/pkg/cloudprovider/faults"
)

// cloud is a minimal provider: Create launches an instance named after
// the NodeClaim on the cheapest offering; the others read its instances.
type cloud struct {
	types     []*catalog.InstanceType
	instances map[string]*karpv1.NodeClaim
}

func newCloud(t *testing.T) *cloud {
	t.Helper()
	types, err := catalog.Parse("test", []byte(`[
	  {"name": "small", "architecture": "amd64", "resources": {"cpu": "2", "memory": "4Gi", "pods": "20"},
	   "offerings": [{"capacityType": "spot", "zone": "zone-a", "price": 0.03}, {"capacityType": "on-demand", "zone": "zone-b", "price": 0.1}]},
	  {"name": "large", "architecture": "amd64", "resources": {"cpu": "8", "memory": "16Gi", "pods": "50"},
	   "offerings": [{"capacityType": "spot", "zone": "zone-a", "price": 0.12}, {"capacityType": "on-demand", "zone": "zone-a", "price": 0.4}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	c := &cloud{instances: map[string]*karpv1.NodeClaim{}}
	for i := range types {
		c.types = append(c.types, &types[i])
	}
	return c
}

func (c *cloud) Name() string { return "test" }
func (c *cloud) NodeClasses() []schema.GroupKind {
	return []schema.GroupKind{{Group: "test", Kind: "TestNodeClass"}}
}
func (c *cloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*catalog.InstanceType, error) {
	return c.types, nil
}
func (c *cloud) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}
func (c *cloud) Create(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	out := nc.DeepCopy()
	out.Status.ProviderID = "test://" + nc.Name
	c.instances[out.Status.ProviderID] = out
	return out, nil
}
func (c *cloud) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	delete(c.instances, nc.Status.ProviderID)
	return cloudprovider.NewNodeClaimNotFoundError(errors.New("gone"))
}
func (c *cloud) Get(_ context.Context, id string) (*karpv1.NodeClaim, error) {
	if nc, ok := c.instances[id]; ok {
		return nc, nil
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(errors.New(id))
}
func (c *cloud) List(context.Context) ([]*karpv1.NodeClaim, error) {
	var out []*karpv1.NodeClaim
	for _, nc := range c.instances {
		out = append(out, nc)
	}
	return out, nil
}

func claim(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.Name = name
	nc.Labels = map[string]string{karpv1.LabelNodePool: "default"}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test", Kind: "TestNodeClass", Name: "default"}
	nc.Spec.Requirements = reqs
	return nc
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func TestRatesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rates faults.Rates
		want  string
	}{
		{"negative", faults.Rates{Throttled: -0.1}, "rates.Throttled"},
		{"above one", faults.Rates{List: 1.5}, "rates.List"},
		{"not a number", faults.Rates{Timeout: nan()}, "rates.Timeout"},
		{"create rates above one together", faults.Rates{LostResponse: 0.6, ServerError: 0.6}, "add up to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := faults.New(newCloud(t), tc.rates, seeded(1)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error naming %s", tc.rates, err, tc.want)
			}
		})
	}
	if _, err := faults.New(newCloud(t), faults.Rates{}, nil); err == nil {
		t.Error("New without an rng: no error")
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

// Each Create fault answers as its kind, and only a lost response
// launches.
func TestCreateFaults(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		rates    faults.Rates
		launched int
		check    func(error) bool
	}{
		{faults.InsufficientCapacity, faults.Rates{InsufficientCapacity: 1}, 0, cloudprovider.IsInsufficientCapacityError},
		{faults.Throttled, faults.Rates{Throttled: 1}, 0, func(err error) bool { return strings.Contains(err.Error(), "throttled") }},
		{faults.ServerError, faults.Rates{ServerError: 1}, 0, func(err error) bool { return strings.Contains(err.Error(), "500") }},
		{faults.Timeout, faults.Rates{Timeout: 1}, 0, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{faults.LostResponse, faults.Rates{LostResponse: 1}, 1, func(err error) bool { return strings.Contains(err.Error(), "test://web-1") }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			inner := newCloud(t)
			p, err := faults.New(inner, tc.rates, seeded(1))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Create(context.Background(), claim("web-1"))
			var injected *faults.Error
			if got != nil || !errors.As(err, &injected) || injected.Kind != tc.kind || injected.Method != "Create" || !tc.check(err) {
				t.Errorf("Create = %v, %v; want an injected %s", got, err, tc.kind)
			}
			if len(inner.instances) != tc.launched {
				t.Errorf("%d instances launched, want %d", len(inner.instances), tc.launched)
			}
			if counts := p.Counts(); counts[tc.kind] != 1 || len(counts) != 1 {
				t.Errorf("Counts() = %v, want one %s", counts, tc.kind)
			}
		})
	}
}

// Insufficient capacity names the offering the NodeClaim would most
// likely have got: its cheapest available one, within its requirements.
func TestInsufficientCapacityNamesTheLikelyOffering(t *testing.T) {
	p, err := faults.New(newCloud(t), faults.Rates{InsufficientCapacity: 1}, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		nc   *karpv1.NodeClaim
		want string
	}{
		{"anything", claim("a"), "small/zone-a/spot"},
		{"on-demand only", claim("b", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}), "small/zone-b/on-demand"},
		{"large only, in zone-a", claim("c",
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"large"}},
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}), "large/zone-a/spot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Create(context.Background(), tc.nc)
			refused := cloudprovider.RefusedOfferings(err)
			if len(refused) != 1 || refused[0].String() != tc.want || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused %v (%v), want %s", refused, err, tc.want)
			}
		})
	}
}

// Delete, Get and List fail transiently without doing anything.
func TestTransientReadAndDeleteFaults(t *testing.T) {
	ctx := context.Background()
	inner := newCloud(t)
	launched, _ := inner.Create(ctx, claim("web-1"))
	p, err := faults.New(inner, faults.Rates{Delete: 1, Get: 1, List: 1}, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, launched); !faults.IsInjected(err) || cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Delete = %v, want an injected transient error", err)
	}
	if len(inner.instances) != 1 {
		t.Error("a failed Delete deleted the instance")
	}
	if _, err := p.Get(ctx, launched.Status.ProviderID); !faults.IsInjected(err) || cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get = %v, want an injected transient error", err)
	}
	if _, err := p.List(ctx); !faults.IsInjected(err) {
		t.Errorf("List = %v, want an injected error", err)
	}
	want := map[string]int{faults.DeleteError: 1, faults.GetError: 1, faults.ListError: 1}
	if got := p.Counts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	if err := p.SetRates(faults.Rates{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFoundError(err) || len(inner.instances) != 0 {
		t.Errorf("Delete without faults: %v, %d instances left", err, len(inner.instances))
	}
}

// The same seed injects the same faults into the same calls, at about the
// rates asked.
func TestSeededRates(t *testing.T) {
	rates := faults.Rates{InsufficientCapacity: 0.1, Throttled: 0.1, ServerError: 0.1, Timeout: 0.1, LostResponse: 0.1}
	run := func(seed uint64) ([]string, map[string]int) {
		p, err := faults.New(newCloud(t), rates, seeded(seed))
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for i := range 1000 {
			_, err := p.Create(context.Background(), claim(fmt.Sprintf("nc-%d", i)))
			var injected *faults.Error
			kind := ""
			if errors.As(err, &injected) {
				kind = injected.Kind
			}
			kinds = append(kinds, kind)
		}
		return kinds, p.Counts()
	}
	a, counts := run(42)
	b, _ := run(42)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the same seed injected different faults")
	}
	if c, _ := run(43); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("another seed injected the same faults")
	}
	for _, kind := range []string{faults.InsufficientCapacity, faults.Throttled, faults.ServerError, faults.Timeout, faults.LostResponse} {
		if n := counts[kind]; n < 60 || n > 140 {
			t.Errorf("%s injected %d times in 1000 Creates at rate 0.1", kind, n)
		}
	}
}
