// Package providertest is the contract suite every CloudProvider must pass:
// the behaviour Nodewright's controllers rely on, checked against a real
// implementation (not a mock). A provider's own tests call Run with a
// harness that builds the provider and NodeClaims it can launch.
package providertest

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Harness is what the suite needs from a provider's test.
type Harness struct {
	Provider cloudprovider.CloudProvider
	// NodePool the provider can serve (its nodeClassRef names a ready
	// NodeClass of the provider's).
	NodePool *karpv1.NodePool
	// NodeClaim returns a new NodeClaim, owned by NodePool, that the provider
	// can launch; extra requirements narrow it.
	NodeClaim func(name string, extra ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim
}

// Run runs the contract suite. newHarness is called once per case, so each
// case starts from an empty cloud.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	ctx := context.Background()

	t.Run("identifies itself and its NodeClasses", func(t *testing.T) {
		h := newHarness(t)
		if h.Provider.Name() == "" || len(h.Provider.NodeClasses()) == 0 {
			t.Errorf("Name() = %q, NodeClasses() = %v", h.Provider.Name(), h.Provider.NodeClasses())
		}
		if !cloudprovider.Manages(h.Provider, h.NodePool.Spec.Template.Spec.NodeClassRef) {
			t.Errorf("the harness NodePool's nodeClassRef %v is not one of %v", h.NodePool.Spec.Template.Spec.NodeClassRef, h.Provider.NodeClasses())
		}
	})

	t.Run("describes instance types with offerings", func(t *testing.T) {
		h := newHarness(t)
		types, err := h.Provider.GetInstanceTypes(ctx, h.NodePool)
		if err != nil || len(types) == 0 {
			t.Fatalf("GetInstanceTypes: %d types, %v", len(types), err)
		}
		for _, it := range types {
			if it.Name == "" || it.Capacity.Cpu().IsZero() || it.Capacity.Memory().IsZero() || len(it.Offerings) == 0 {
				t.Errorf("instance type %q: capacity %v, %d offerings", it.Name, it.Capacity, len(it.Offerings))
			}
			for _, o := range it.Offerings {
				if o.Zone == "" || o.CapacityType == "" || o.Price < 0 {
					t.Errorf("instance type %q: offering %+v", it.Name, o)
				}
			}
		}
	})

	t.Run("creates an instance that meets the requirements", func(t *testing.T) {
		h := newHarness(t)
		nc := h.NodeClaim("contract-create")
		got, err := h.Provider.Create(ctx, nc)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		checkLaunched(t, nc, got)
		found, err := h.Provider.Get(ctx, got.Status.ProviderID)
		if err != nil || found.Status.ProviderID != got.Status.ProviderID {
			t.Errorf("Get(%s) = %v, %v", got.Status.ProviderID, found, err)
		}
		listed, err := h.Provider.List(ctx)
		i := slices.IndexFunc(listed, func(c *karpv1.NodeClaim) bool { return c.Status.ProviderID == got.Status.ProviderID })
		switch {
		case err != nil || i < 0:
			t.Errorf("List does not include %s: %v", got.Status.ProviderID, err)
		case listed[i].Name != got.Name:
			t.Errorf("List names instance %s %q; garbage collection needs the NodeClaim it was launched for, %q", got.Status.ProviderID, listed[i].Name, got.Name)
		case listed[i].CreationTimestamp.IsZero():
			t.Errorf("List gives instance %s no launch time; garbage collection needs it", got.Status.ProviderID)
		}
	})

	t.Run("launches once per NodeClaim", func(t *testing.T) {
		// Create is called again for a NodeClaim whose launch was not
		// recorded: its answer was lost, the status write after it failed,
		// or the controller restarted. The NodeClaim may carry the labels
		// and annotations the first launch returned (they are written
		// before the status) or not.
		h := newHarness(t)
		nc := h.NodeClaim("contract-once")
		first, err := h.Provider.Create(ctx, nc.DeepCopy())
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		recorded := nc.DeepCopy()
		for k, v := range first.Labels {
			if recorded.Labels == nil {
				recorded.Labels = map[string]string{}
			}
			recorded.Labels[k] = v
		}
		for k, v := range first.Annotations {
			if recorded.Annotations == nil {
				recorded.Annotations = map[string]string{}
			}
			recorded.Annotations[k] = v
		}
		for _, again := range []*karpv1.NodeClaim{recorded, nc.DeepCopy()} {
			got, err := h.Provider.Create(ctx, again)
			if err != nil {
				t.Fatalf("Create again for nodeclaim %s: %v", nc.Name, err)
			}
			if got.Status.ProviderID != first.Status.ProviderID {
				t.Errorf("Create again for nodeclaim %s launched %s, want the first launch's %s", nc.Name, got.Status.ProviderID, first.Status.ProviderID)
			}
			checkLaunched(t, nc, got)
		}
		listed, err := h.Provider.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var ids []string
		for _, c := range listed {
			if c.Name == nc.Name {
				ids = append(ids, c.Status.ProviderID)
			}
		}
		if len(ids) != 1 {
			t.Errorf("nodeclaim %s has %d instances %v after three Creates, want 1", nc.Name, len(ids), ids)
		}
	})

	t.Run("never takes an earlier same-named NodeClaim's instance", func(t *testing.T) {
		// A NodeClaim deleted before its status recorded its instance
		// leaves the instance behind; a new NodeClaim of the same name
		// (another UID) must not get it: it may not meet the new one's
		// requirements, and two NodeClaims would share one instance.
		h := newHarness(t)
		earlier := h.NodeClaim("contract-reused")
		earlier.UID = "contract-uid-earlier"
		first, err := h.Provider.Create(ctx, earlier)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		later := h.NodeClaim("contract-reused")
		later.UID = "contract-uid-later"
		got, err := h.Provider.Create(ctx, later)
		if err == nil && got.Status.ProviderID == first.Status.ProviderID {
			t.Errorf("nodeclaim %s (uid %s) got %s, the instance of the earlier nodeclaim of that name (uid %s)",
				later.Name, later.UID, got.Status.ProviderID, earlier.UID)
		}
	})

	t.Run("honours narrowing requirements", func(t *testing.T) {
		h := newHarness(t)
		types, err := h.Provider.GetInstanceTypes(ctx, h.NodePool)
		if err != nil || len(types) == 0 {
			t.Fatalf("GetInstanceTypes: %v", err)
		}
		// Ask for the last type in a single zone and capacity type it offers.
		it := types[len(types)-1]
		o := it.Offerings[len(it.Offerings)-1]
		nc := h.NodeClaim("contract-narrow",
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{it.Name}},
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{o.Zone}},
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{o.CapacityType}},
		)
		got, err := h.Provider.Create(ctx, nc)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		checkLaunched(t, nc, got)
		if got.Labels[corev1.LabelInstanceTypeStable] != it.Name || got.Labels[corev1.LabelTopologyZone] != o.Zone || got.Labels[karpv1.LabelCapacityType] != o.CapacityType {
			t.Errorf("launched %v, want %s in %s as %s", got.Labels, it.Name, o.Zone, o.CapacityType)
		}
	})

	t.Run("refuses what no offering satisfies with insufficient capacity", func(t *testing.T) {
		h := newHarness(t)
		nc := h.NodeClaim("contract-impossible",
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"no-such-zone"}})
		if _, err := h.Provider.Create(ctx, nc); !cloudprovider.IsInsufficientCapacityError(err) {
			t.Errorf("Create in a zone that does not exist: %v, want InsufficientCapacityError", err)
		}
	})

	t.Run("deletes until not found", func(t *testing.T) {
		h := newHarness(t)
		nc := h.NodeClaim("contract-delete")
		got, err := h.Provider.Create(ctx, nc)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		deleted := false
		for range 10 {
			err = h.Provider.Delete(ctx, got)
			if cloudprovider.IsNodeClaimNotFoundError(err) {
				deleted = true
				break
			}
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		if !deleted {
			t.Fatal("Delete never reported the instance gone")
		}
		if _, err := h.Provider.Get(ctx, got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
			t.Errorf("Get after delete: %v, want NodeClaimNotFoundError", err)
		}
		if err := h.Provider.Delete(ctx, got); !cloudprovider.IsNodeClaimNotFoundError(err) {
			t.Errorf("second Delete: %v, want NodeClaimNotFoundError", err)
		}
	})

	t.Run("does not find what it never launched", func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.Provider.Get(ctx, "nowhere://nothing"); !cloudprovider.IsNodeClaimNotFoundError(err) {
			t.Errorf("Get of an unknown provider ID: %v, want NodeClaimNotFoundError", err)
		}
	})
}

// checkLaunched: a provider ID, capacity and allocatable, and labels that
// name one instance type, zone and capacity type meeting the requirements.
func checkLaunched(t *testing.T, asked, got *karpv1.NodeClaim) {
	t.Helper()
	if got.Status.ProviderID == "" {
		t.Error("no status.providerID")
	}
	if got.Status.Capacity.Cpu().IsZero() || got.Status.Allocatable.Memory().IsZero() {
		t.Errorf("capacity %v, allocatable %v", got.Status.Capacity, got.Status.Allocatable)
	}
	for _, k := range []string{corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, karpv1.LabelCapacityType} {
		if got.Labels[k] == "" {
			t.Errorf("launched NodeClaim has no %s label: %v", k, got.Labels)
		}
	}
	reqs, err := requirement.FromAPI(asked.Spec.Requirements)
	if err != nil {
		t.Fatal(err)
	}
	launched := requirement.FromLabels(got.Labels)
	if err := reqs.Intersects(launched); err != nil {
		t.Errorf("launched %v does not meet the requirements: %v", got.Labels, err)
	}
	if got.Name != asked.Name {
		t.Errorf("launched NodeClaim is named %q, asked %q", got.Name, asked.Name)
	}
}
