package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// An independent checker: the predicates written again, plainly, without the
// solver's requirement algebra or resource vectors.

func matchExpr(labels map[string]string, e corev1.NodeSelectorRequirement) bool {
	v, ok := labels[e.Key]
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	}
	n, err1 := strconv.ParseInt(v, 10, 64)
	bound, err2 := strconv.ParseInt(e.Values[0], 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return false
	}
	switch e.Operator {
	case corev1.NodeSelectorOpGt:
		return n > bound
	case corev1.NodeSelectorOpLt:
		return n < bound
	case karpv1.NodeSelectorOpGte:
		return n >= bound
	case karpv1.NodeSelectorOpLte:
		return n <= bound
	}
	return false
}

func matchAll(labels map[string]string, exprs []corev1.NodeSelectorRequirement) bool {
	for _, e := range exprs {
		if !matchExpr(labels, e) {
			return false
		}
	}
	return true
}

// podAllowedOn: nodeSelector and required node affinity (kube-scheduler's rule).
func podAllowedOn(p *corev1.Pod, labels map[string]string) bool {
	for k, v := range p.Spec.NodeSelector {
		if labels[k] != v {
			return false
		}
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) > 0 && matchAll(labels, term.MatchExpressions) {
			return true
		}
	}
	return false
}

// toleratesHard: every NoSchedule and NoExecute taint is tolerated.
func toleratesHard(p *corev1.Pod, taints []corev1.Taint) bool {
	for _, taint := range taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range p.Spec.Tolerations {
			ok = ok || tol.ToleratesTaint(logr.Discard(), &taint, true)
		}
		if !ok {
			return false
		}
	}
	return true
}

func sumRequests(pods []*corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			cur := total[name]
			cur.Add(q)
			total[name] = cur
		}
		pods := total[corev1.ResourcePods]
		pods.Add(resource.MustParse("1"))
		total[corev1.ResourcePods] = pods
	}
	return total
}

func fitsIn(req, alloc corev1.ResourceList) error {
	for name, q := range req {
		a := alloc[name]
		if q.Cmp(a) > 0 {
			return fmt.Errorf("%s %s > allocatable %s", name, q.String(), a.String())
		}
	}
	return nil
}

func poolLabels(np NodePool, it *catalog.InstanceType, o catalog.Offering) map[string]string {
	labels := map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelTopologyZone: o.Zone, karpv1.LabelCapacityType: o.CapacityType}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	return labels
}

// daemonsOn: the daemon pods that would run on a node with these labels and taints.
func daemonsOn(in Input, labels map[string]string, taints []corev1.Taint) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range in.DaemonSetPods {
		if toleratesHard(d, taints) && podAllowedOn(d, labels) {
			out = append(out, d)
		}
	}
	return out
}

func checkPlan(in Input, plan Plan) []string {
	var errs []string
	seen := map[string]int{}
	pools := map[string]NodePool{}
	for _, np := range in.NodePools {
		pools[np.Name] = np
	}
	launched := map[string]corev1.ResourceList{} // pool -> largest-candidate capacity sum
	for i, nc := range plan.NodeClaims {
		np, ok := pools[nc.NodePool]
		if !ok {
			errs = append(errs, fmt.Sprintf("claim %d: unknown pool %s", i, nc.NodePool))
			continue
		}
		var it *catalog.InstanceType
		for _, c := range np.InstanceTypes {
			if c.Name == nc.InstanceType {
				it = c
			}
		}
		if it == nil {
			errs = append(errs, fmt.Sprintf("claim %d: type %s not offered to pool %s", i, nc.InstanceType, nc.NodePool))
			continue
		}
		off := catalog.Offering{Zone: nc.Zone, CapacityType: nc.CapacityType, Price: nc.Price, Available: true}
		if !slices.Contains(it.Offerings, off) || (in.Unavailable != nil && in.Unavailable(it.Name, off.Zone, off.CapacityType)) {
			errs = append(errs, fmt.Sprintf("claim %d: offering %+v of %s is not available", i, off, it.Name))
		}
		labels := poolLabels(np, it, off)
		if !matchAll(labels, toCore(np.Spec.Template.Spec.Requirements)) {
			errs = append(errs, fmt.Sprintf("claim %d: %s does not meet pool %s's requirements", i, it.Name, np.Name))
		}
		taints := np.Spec.Template.Spec.Taints
		for _, p := range nc.Pods {
			seen[p.Name]++
			if !podAllowedOn(p, labels) {
				errs = append(errs, fmt.Sprintf("claim %d: pod %s's node selection rejects %v", i, p.Name, labels))
			}
			if !toleratesHard(p, taints) {
				errs = append(errs, fmt.Sprintf("claim %d: pod %s does not tolerate %v", i, p.Name, taints))
			}
		}
		if err := fitsIn(sumRequests(append(slices.Clone(nc.Pods), daemonsOn(in, labels, taints)...)), it.Allocatable); err != nil {
			errs = append(errs, fmt.Sprintf("claim %d (%s): pods and daemons do not fit: %v", i, it.Name, err))
		}
		largest := corev1.ResourceList{}
		for _, name := range nc.InstanceTypeOptions {
			for _, c := range np.InstanceTypes {
				if c.Name != name {
					continue
				}
				for r, q := range c.Capacity {
					if cur := largest[r]; q.Cmp(cur) > 0 {
						largest[r] = q
					}
				}
			}
		}
		total := launched[np.Name]
		if total == nil {
			total = corev1.ResourceList{}
		}
		for r, q := range largest {
			cur := total[r]
			cur.Add(q)
			total[r] = cur
		}
		launched[np.Name] = total
	}
	for name, total := range launched {
		np := pools[name]
		for r, limit := range np.Spec.Limits {
			if r == "nodes" {
				continue
			}
			used := total[r]
			used.Add(np.Usage[r])
			if used.Cmp(limit) > 0 {
				errs = append(errs, fmt.Sprintf("pool %s: %s could reach %s, limit %s", name, r, used.String(), limit.String()))
			}
		}
	}
	nodes := map[string]Node{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	for _, e := range plan.Existing {
		n := nodes[e.Node]
		for _, p := range e.Pods {
			seen[p.Name]++
			if !podAllowedOn(p, n.Labels) || !toleratesHard(p, n.Taints) {
				errs = append(errs, fmt.Sprintf("node %s: pod %s is not allowed there", n.Name, p.Name))
			}
		}
		if err := fitsIn(sumRequests(append(slices.Clone(n.Pods), e.Pods...)), n.Allocatable); err != nil {
			errs = append(errs, fmt.Sprintf("node %s: %v", n.Name, err))
		}
	}
	for _, u := range plan.Unschedulable {
		seen[u.Pod.Name]++
		if u.Reason == "" {
			errs = append(errs, fmt.Sprintf("pod %s is unschedulable without a reason", u.Pod.Name))
		}
	}
	for _, p := range in.Pods {
		if seen[p.Name] != 1 {
			errs = append(errs, fmt.Sprintf("pod %s appears %d times in the plan", p.Name, seen[p.Name]))
		}
	}
	return errs
}

func toCore(reqs []karpv1.NodeSelectorRequirementWithMinValues) []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// aloneFeasible: could a fresh node from some pool host this pod by itself?
func aloneFeasible(in Input, p *corev1.Pod) bool {
	for _, np := range in.NodePools {
		if !toleratesHard(p, np.Spec.Template.Spec.Taints) {
			continue
		}
		for _, it := range np.InstanceTypes {
			for _, o := range it.Offerings {
				if !o.Available || (in.Unavailable != nil && in.Unavailable(it.Name, o.Zone, o.CapacityType)) {
					continue
				}
				labels := poolLabels(np, it, o)
				if !matchAll(labels, toCore(np.Spec.Template.Spec.Requirements)) || !podAllowedOn(p, labels) {
					continue
				}
				if fitsIn(sumRequests(append([]*corev1.Pod{p}, daemonsOn(in, labels, np.Spec.Template.Spec.Taints)...)), it.Allocatable) == nil {
					return true
				}
			}
		}
	}
	return false
}

// randomInput builds a workload from a seed: pools with labels, taints,
// requirements and limits; existing nodes; pods with selectors, affinity,
// tolerations and extended resources; daemon sets.
func randomInput(seed uint64) Input {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	var its []*catalog.InstanceType
	for i := range 3 + rng.IntN(6) {
		cpu := 1 << rng.IntN(6)
		extra := []string{}
		if rng.IntN(5) == 0 {
			extra = []string{"nvidia.com/gpu", strconv.Itoa(1 + rng.IntN(4))}
		}
		it := instanceType(fmt.Sprintf("t%d", i), cpu, cpu*(1+rng.IntN(8)), float64(cpu)*0.05*(0.5+rng.Float64()), extra...)
		it.Labels["category"] = pick("c", "m", "r")
		it.Labels[corev1.LabelArchStable] = pick("amd64", "arm64")
		for j := range it.Offerings {
			it.Offerings[j].Available = rng.IntN(6) != 0
		}
		its = append(its, it)
	}
	var in Input
	for i := range 1 + rng.IntN(3) {
		var opts []poolOpt
		if rng.IntN(2) == 0 {
			opts = append(opts, withRequirement("category", "In", pick("c", "m", "r"), pick("c", "m", "r")))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, withRequirement(karpv1.LabelCapacityType, "In", pick("spot", "on-demand")))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, withTaint("dedicated", pick("a", "b"), corev1.TaintEffect(pick("NoSchedule", "NoExecute", "PreferNoSchedule"))))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, withLabel("team", pick("x", "y")))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, withLimits("cpu", strconv.Itoa(8+rng.IntN(64))))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, withWeight(int32(1+rng.IntN(10))))
		}
		in.NodePools = append(in.NodePools, nodePool(fmt.Sprintf("pool%d", i), its, opts...))
	}
	for i := range rng.IntN(3) {
		in.Nodes = append(in.Nodes, Node{
			Name:        fmt.Sprintf("node%d", i),
			Labels:      map[string]string{"category": pick("c", "m"), "team": pick("x", "y"), corev1.LabelArchStable: "amd64"},
			Allocatable: rl("cpu", strconv.Itoa(1+rng.IntN(8)), "memory", fmt.Sprintf("%dGi", 1+rng.IntN(16)), "pods", "20"),
			Initialized: true,
		})
	}
	if rng.IntN(2) == 0 {
		in.DaemonSetPods = append(in.DaemonSetPods, pod("ds-agent", pick("100m", "500m"), "128Mi"))
	}
	for i := range 1 + rng.IntN(40) {
		var opts []podOpt
		if rng.IntN(4) == 0 {
			opts = append(opts, withNodeSelector("team", pick("x", "y", "z")))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, withToleration("dedicated", corev1.TaintEffect(pick("NoSchedule", "NoExecute", ""))))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, withRequiredTerms(
				[]corev1.NodeSelectorRequirement{expr("category", corev1.NodeSelectorOperator(pick("In", "NotIn")), pick("c", "m", "r"))},
				[]corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, "In", pick("amd64", "arm64"))},
			))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, withPreferred(int32(1+rng.IntN(100)), expr("category", "In", pick("c", "m", "r"))))
		}
		if rng.IntN(8) == 0 {
			opts = append(opts, withRequests("nvidia.com/gpu", "1"))
		}
		in.Pods = append(in.Pods, pod(fmt.Sprintf("p%d", i), pick("100m", "500m", "1", "2", "4"), pick("128Mi", "1Gi", "4Gi", "16Gi"), opts...))
	}
	// Topology groups, each homogeneous so the final-state checks hold: zone
	// spread, hostname anti-affinity, zone self-affinity, hostname spread.
	groups := []podOpt{
		withSpread(corev1.LabelTopologyZone, int32(1+rng.IntN(2)), corev1.DoNotSchedule, selector("app", "spread")),
		withAntiAffinity(corev1.LabelHostname, selector("app", "anti")),
		withPodAffinity(corev1.LabelTopologyZone, selector("app", "affine"), nil),
		withSpread(corev1.LabelHostname, 1, corev1.DoNotSchedule, selector("app", "host")),
	}
	apps := []string{"spread", "anti", "affine", "host"}
	for g := range groups {
		if rng.IntN(2) == 0 {
			continue
		}
		for i := range rng.IntN(8) {
			in.Pods = append(in.Pods, pod(fmt.Sprintf("%s%d", apps[g], i), pick("100m", "500m", "1"), pick("128Mi", "1Gi"), withLabels("app", apps[g]), groups[g]))
		}
	}
	if len(in.Nodes) > 0 && rng.IntN(2) == 0 {
		// A running pod whose anti-affinity repels the "anti" group.
		in.Nodes[0].Pods = append(in.Nodes[0].Pods, pod("repeller", "100m", "64Mi", withAntiAffinity(corev1.LabelHostname, selector("app", "anti"))))
	}
	return in
}

func checkSeed(t *testing.T, seed uint64) {
	in := randomInput(seed)
	plan := Solve(in)
	for _, e := range append(checkPlan(in, plan), checkTopology(in, plan)...) {
		t.Errorf("seed %d: %s", seed, e)
	}
	limited := slices.ContainsFunc(in.NodePools, func(np NodePool) bool { return len(np.Spec.Limits) > 0 })
	if limited {
		return // with limits, what fits depends on what came first
	}
	for _, u := range plan.Unschedulable {
		if u.Pod.Labels["app"] != "" {
			continue // topology decides; the checks above cover it
		}
		if aloneFeasible(in, u.Pod) {
			t.Errorf("seed %d: pod %s is unschedulable (%s), but a fresh node could host it", seed, u.Pod.Name, u.Reason)
		}
	}
}

// No pod is ever placed where a constraint forbids it, no limit is exceeded,
// every pod is accounted for exactly once, and no pod a fresh node could host
// is given up on.
func TestPlansPassTheIndependentChecker(t *testing.T) {
	for seed := range uint64(500) {
		checkSeed(t, seed)
	}
}

func FuzzSolve(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkSeed(t, seed) })
}

// placedPod is a pod and the labels of the node it ends on.
type placedPod struct {
	pod    *corev1.Pod
	labels map[string]string
}

// finalPlacement lists every pod on a node after the plan: the pods already
// running on existing nodes, and the plan's placements.
func finalPlacement(in Input, plan Plan) []placedPod {
	var out []placedPod
	pools := map[string]NodePool{}
	for _, np := range in.NodePools {
		pools[np.Name] = np
	}
	nodeLabels := func(n Node) map[string]string {
		l := map[string]string{corev1.LabelHostname: n.Name}
		for k, v := range n.Labels {
			l[k] = v
		}
		return l
	}
	byName := map[string]Node{}
	for _, n := range in.Nodes {
		byName[n.Name] = n
		for _, p := range n.Pods {
			out = append(out, placedPod{p, nodeLabels(n)})
		}
	}
	for _, e := range plan.Existing {
		for _, p := range e.Pods {
			out = append(out, placedPod{p, nodeLabels(byName[e.Node])})
		}
	}
	for i, nc := range plan.NodeClaims {
		np := pools[nc.NodePool]
		for _, it := range np.InstanceTypes {
			if it.Name != nc.InstanceType {
				continue
			}
			l := poolLabels(np, it, catalog.Offering{Zone: nc.Zone, CapacityType: nc.CapacityType})
			l[corev1.LabelHostname] = fmt.Sprintf("new-node-%d", i)
			for _, p := range nc.Pods {
				out = append(out, placedPod{p, l})
			}
		}
	}
	return out
}

func termSelects(term corev1.PodAffinityTerm, owner, p *corev1.Pod) bool {
	if term.LabelSelector == nil {
		return false
	}
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil && p.Namespace != owner.Namespace {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	return err == nil && sel.Matches(labels.Set(p.Labels))
}

// checkTopology verifies required pod anti-affinity (both ways), required pod
// affinity, and for hard spread constraints that the final skew over the
// domains in use is within maxSkew (a necessary condition).
func checkTopology(in Input, plan Plan) []string {
	var errs []string
	all := finalPlacement(in, plan)
	pending := map[*corev1.Pod]bool{}
	for _, p := range in.Pods {
		pending[p] = true
	}
	for _, a := range all {
		aff := a.pod.Spec.Affinity
		if aff != nil && aff.PodAntiAffinity != nil {
			for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				for _, b := range all {
					if a.pod == b.pod || !(pending[a.pod] || pending[b.pod]) || !termSelects(term, a.pod, b.pod) {
						continue
					}
					if da, ok := a.labels[term.TopologyKey]; ok && da == b.labels[term.TopologyKey] {
						errs = append(errs, fmt.Sprintf("%s and %s share %s=%s despite %s's anti-affinity", a.pod.Name, b.pod.Name, term.TopologyKey, da, a.pod.Name))
					}
				}
			}
		}
		if !pending[a.pod] {
			continue
		}
		if aff != nil && aff.PodAffinity != nil {
			for _, term := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				found := false
				for _, b := range all {
					found = found || (termSelects(term, a.pod, b.pod) && b.labels[term.TopologyKey] == a.labels[term.TopologyKey])
				}
				if !found {
					errs = append(errs, fmt.Sprintf("%s's affinity on %s finds no matching pod in %s", a.pod.Name, term.TopologyKey, a.labels[term.TopologyKey]))
				}
			}
		}
		for _, c := range a.pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			sel, _ := metav1.LabelSelectorAsSelector(c.LabelSelector)
			counts := map[string]int{}
			for _, b := range all {
				if b.pod.Namespace == a.pod.Namespace && sel.Matches(labels.Set(b.pod.Labels)) {
					if d, ok := b.labels[c.TopologyKey]; ok {
						counts[d]++
					}
				}
			}
			lo, hi := -1, 0
			for _, n := range counts {
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
			if c.TopologyKey != corev1.LabelHostname && hi-lo > int(c.MaxSkew) {
				errs = append(errs, fmt.Sprintf("spread of %s on %s: counts %v exceed maxSkew %d", a.pod.Name, c.TopologyKey, counts, c.MaxSkew))
			}
			if c.TopologyKey == corev1.LabelHostname && hi > int(c.MaxSkew) {
				errs = append(errs, fmt.Sprintf("hostname spread of %s: a node holds %d > maxSkew %d", a.pod.Name, hi, c.MaxSkew))
			}
		}
	}
	return errs
}
