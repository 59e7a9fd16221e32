package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// InstanceTypesOf gives a NodePool's instance types. ok false leaves the
// pool out (another provider's NodeClass, or types that cannot be read);
// an error stops the decision.
type InstanceTypesOf func(np *karpv1.NodePool) (types []*catalog.InstanceType, ok bool, err error)

// Launchable reports whether provisioning may launch from a NodePool, and
// why not: it is not being deleted, not static (spec.replicas: its own
// controller keeps its node count) and Ready, as in Karpenter.
func Launchable(np *karpv1.NodePool) (bool, string) {
	switch {
	case np.DeletionTimestamp != nil:
		return false, "it is being deleted"
	case np.Spec.Replicas != nil:
		return false, "it is static (spec.replicas)"
	case !meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady):
		return false, "it is not Ready"
	}
	return true, ""
}

// Pools gathers the NodePools provisioning and disruption may launch from
// (Launchable), with their instance types and usage: the capacity of their
// nodes and launched NodeClaims, and each NodeClaim still launching counted
// by its largest instance-type option, so limits hold whatever the
// launches pick. The controller and `nodewright plan` both build their
// pools here.
func (s Snapshot) Pools(typesOf InstanceTypesOf) ([]sched.NodePool, map[string]*karpv1.NodePool, error) {
	var out []sched.NodePool
	byName := map[string]*karpv1.NodePool{}
	for _, np := range s.NodePools {
		if ok, _ := Launchable(np); !ok {
			continue
		}
		types, ok, err := typesOf(np)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		usage := withLaunching(s.Usage[np.Name], s.Launching[np.Name], types)
		out = append(out, sched.NodePool{NodePool: np, InstanceTypes: types, Usage: usage})
		byName[np.Name] = np
	}
	return out, byName, nil
}

// withLaunching returns a pool's usage plus its NodeClaims still
// launching, each counted as its largest option (a copy: usage is the
// snapshot's).
func withLaunching(usage corev1.ResourceList, claims []*karpv1.NodeClaim, types []*catalog.InstanceType) corev1.ResourceList {
	if len(claims) == 0 {
		return usage
	}
	out := usage.DeepCopy()
	for _, nc := range claims {
		out = sched.AddNode(out, largestOption(nc, types))
	}
	return out
}

// largestOption is, per resource, the most capacity any instance-type
// option of a NodeClaim not launched yet has: the most its launch can
// take. A claim naming none of the pool's types counts as the pool's
// largest; with no types at all, as what it asked for.
func largestOption(nc *karpv1.NodeClaim, types []*catalog.InstanceType) corev1.ResourceList {
	named := map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			for _, v := range r.Values {
				named[v] = true
			}
		}
	}
	envelope := func(keep func(*catalog.InstanceType) bool) corev1.ResourceList {
		out := corev1.ResourceList{}
		for _, it := range types {
			if !keep(it) {
				continue
			}
			for name, q := range it.Capacity {
				if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
					out[name] = q.DeepCopy()
				}
			}
		}
		return out
	}
	if out := envelope(func(it *catalog.InstanceType) bool { return named[it.Name] }); len(out) > 0 {
		return out
	}
	if out := envelope(func(*catalog.InstanceType) bool { return true }); len(out) > 0 {
		return out
	}
	return nc.Spec.Resources.Requests
}
