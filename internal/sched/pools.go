package sched

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/internal/sched/resources"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// poolState is a NodePool prepared for the solver.
type poolState struct {
	name   string
	weight int32
	// reqs: template requirements, template labels and karpenter.sh/nodepool.
	reqs          requirement.Requirements
	taints        []corev1.Taint
	preferNoSched bool
	types         []*typeState
	// limits: remaining = limits − usage − what new claims reserve.
	limited   bool
	remaining resources.Vector
	limitSet  []int // slots that have a limit
	nodesLeft int64 // -1: no node-count limit
	invalid   error
	// domainCache: the values the pool's nodes can take, per label key.
	domainCache map[string][]string
	// daemonPorts: host ports of the DaemonSet pods that run on its nodes.
	daemonPorts []hostPort
}

// typeState is an instance type as one pool would launch it.
type typeState struct {
	it          *catalog.InstanceType
	reqs        requirement.Requirements
	capacity    resources.Vector
	allocatable resources.Vector // minus the pool's daemon overhead
	overhead    resources.Vector // daemon pods that would run on it
	offerings   []catalog.Offering
	price       float64 // cheapest available offering
	// zones and capacityTypes of the admitted offerings, sorted.
	zones, capacityTypes []string
}

func (s *solver) preparePool(np NodePool) *poolState {
	ps := &poolState{name: np.Name, nodesLeft: -1}
	if np.Spec.Weight != nil {
		ps.weight = *np.Spec.Weight
	}
	tmpl := np.Spec.Template
	reqs, err := requirement.FromAPI(tmpl.Spec.Requirements)
	if err != nil {
		ps.invalid = fmt.Errorf("invalid requirements: %w", err)
		return ps
	}
	reqs.AddAll(requirement.FromLabels(tmpl.ObjectMeta.Labels))
	reqs.Add(requirement.MustNew(karpv1.LabelNodePool, corev1.NodeSelectorOpIn, np.Name))
	ps.reqs = reqs
	ps.taints = tmpl.Spec.Taints
	for _, t := range ps.taints {
		ps.preferNoSched = ps.preferNoSched || t.Effect == corev1.TaintEffectPreferNoSchedule
	}
	if len(np.Spec.Limits) > 0 {
		ps.limited = true
		limits := corev1.ResourceList(np.Spec.Limits).DeepCopy()
		if n, ok := limits["nodes"]; ok {
			used := np.Usage["nodes"]
			ps.nodesLeft = n.Value() - used.Value()
			delete(limits, "nodes")
		}
		ps.remaining = s.ix.Vector(limits).Minus(s.ix.Vector(np.Usage))
		for name := range limits {
			ps.limitSet = append(ps.limitSet, s.ix.Slot(name))
		}
		slices.Sort(ps.limitSet)
	}
	for _, ds := range s.daemons {
		if _, bad := untolerated(noPreferNoSchedule(ps.taints), ds.tolerations); !bad && len(ds.ports) > 0 &&
			slices.ContainsFunc(ds.terms, func(t requirement.Requirements) bool { return ps.reqs.Compatible(t, s.daemonKnown) == nil }) {
			ps.daemonPorts = append(ps.daemonPorts, ds.ports...)
		}
	}
	// A label some of the pool's types define and another does not is
	// absent from that other type's nodes: its requirements say so
	// (DoesNotExist), so Exists and In select only the types that define
	// it, as Karpenter's instance types declare the labels they lack.
	typeKeys := map[string]bool{}
	for _, it := range np.InstanceTypes {
		for k := range it.Labels {
			typeKeys[k] = true
		}
	}
	delete(typeKeys, corev1.LabelOSStable) // from OperatingSystems when not a label
	for k := range tmpl.ObjectMeta.Labels {
		delete(typeKeys, k) // the pool stamps it on every node, whatever the type
	}
	for _, it := range np.InstanceTypes {
		if ts := s.prepareType(ps, it, typeKeys); ts != nil {
			ps.types = append(ps.types, ts)
		}
	}
	slices.SortStableFunc(ps.types, func(a, b *typeState) int { return cmp.Compare(a.price, b.price) })
	return ps
}

// prepareType returns nil when the pool can never launch the type.
func (s *solver) prepareType(ps *poolState, it *catalog.InstanceType, typeKeys map[string]bool) *typeState {
	ts := &typeState{it: it, capacity: s.ix.Vector(it.Capacity)}
	ts.reqs = requirement.FromLabels(it.Labels)
	if len(it.OperatingSystems) > 1 {
		ts.reqs.Add(requirement.MustNew(corev1.LabelOSStable, corev1.NodeSelectorOpIn, it.OperatingSystems...))
	}
	for k := range typeKeys {
		if _, ok := it.Labels[k]; !ok {
			ts.reqs.Add(requirement.MustNew(k, corev1.NodeSelectorOpDoesNotExist))
		}
	}
	for _, o := range it.Offerings {
		if !o.Available || (s.in.Unavailable != nil && s.in.Unavailable(it.Name, o.Zone, o.CapacityType)) {
			continue
		}
		if offeringAllowed(ps.reqs, o) {
			ts.offerings = append(ts.offerings, o)
		}
	}
	if len(ts.offerings) == 0 || ps.reqs.Intersects(ts.reqs) != nil {
		return nil
	}
	var zones, cts []string
	ts.price = ts.offerings[0].Price
	for _, o := range ts.offerings {
		zones, cts = append(zones, o.Zone), append(cts, o.CapacityType)
		ts.price = min(ts.price, o.Price)
	}
	slices.Sort(zones)
	slices.Sort(cts)
	ts.zones, ts.capacityTypes = slices.Compact(zones), slices.Compact(cts)
	ts.reqs.Add(requirement.MustNew(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, ts.zones...))
	ts.reqs.Add(requirement.MustNew(karpv1.LabelCapacityType, corev1.NodeSelectorOpIn, ts.capacityTypes...))
	ts.overhead = s.daemonOverhead(ps, ts)
	ts.allocatable = s.ix.Vector(it.Allocatable).Minus(ts.overhead)
	return ts
}

// offeringAllowed reports whether requirements admit an offering's zone and
// capacity type.
func offeringAllowed(reqs requirement.Requirements, o catalog.Offering) bool {
	return offeringFilter(reqs)(o)
}

// offeringFilter looks the zone and capacity-type requirements up once and
// returns a test for many offerings.
func offeringFilter(reqs requirement.Requirements) func(catalog.Offering) bool {
	zone, hasZone := reqs.Get(corev1.LabelTopologyZone)
	ct, hasCT := reqs.Get(karpv1.LabelCapacityType)
	return func(o catalog.Offering) bool {
		return (!hasZone || zone.Has(o.Zone)) && (!hasCT || ct.Has(o.CapacityType))
	}
}

// daemonOverhead sums the requests of the DaemonSet pods that would run on a
// node of this type from this pool: they tolerate the pool's taints
// (PreferNoSchedule aside) and their required node affinity can match it.
func (s *solver) daemonOverhead(ps *poolState, ts *typeState) resources.Vector {
	total := make(resources.Vector, s.ix.Len())
	for _, ds := range s.daemons {
		if _, bad := untolerated(noPreferNoSchedule(ps.taints), ds.tolerations); bad {
			continue
		}
		for _, term := range ds.terms {
			if ps.reqs.Compatible(term, s.daemonKnown) == nil && ts.reqs.Intersects(term) == nil {
				total = total.AddInPlace(ds.requests)
				break
			}
		}
	}
	return total
}

func noPreferNoSchedule(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectPreferNoSchedule })
}

// hasOffering reports whether the type has an offering the requirements admit.
func (ts *typeState) hasOffering(reqs requirement.Requirements) bool {
	return slices.ContainsFunc(ts.offerings, offeringFilter(reqs))
}

// cheapest returns the cheapest offering admits accepts.
func (ts *typeState) cheapest(admits func(catalog.Offering) bool) (catalog.Offering, bool) {
	best, found := catalog.Offering{}, false
	for _, o := range ts.offerings {
		if admits(o) && (!found || o.Price < best.Price) {
			best, found = o, true
		}
	}
	return best, found
}

// withinLimits reports whether a new node of capacity c fits what the pool
// may still add.
func (ps *poolState) withinLimits(c resources.Vector) bool {
	return ps.nodesLeft != 0 && ps.fits(c, ps.remaining)
}

// fits compares a capacity with room on the limited resources only.
func (ps *poolState) fits(c, room resources.Vector) bool {
	for _, slot := range ps.limitSet {
		if c.At(slot) > room.At(slot) {
			return false
		}
	}
	return true
}

// limitsString renders the room left on the limited resources.
func (ps *poolState) limitsString(ix *resources.Index) string {
	room := make(resources.Vector, ix.Len())
	for _, slot := range ps.limitSet {
		room[slot] = max(ps.remaining.At(slot), 0)
	}
	return formatResources(ix.ResourceList(room))
}

// sortPools orders pools by weight, highest first; ties by name as Karpenter
// does.
func sortPools(pools []*poolState) {
	slices.SortStableFunc(pools, func(a, b *poolState) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		return cmp.Compare(b.name, a.name)
	})
}
