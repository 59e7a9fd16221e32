package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodewright/nodewright/internal/sched/requirement"
)

type topoKind int

const (
	topoSpread topoKind = iota
	topoAffinity
	topoAntiAffinity
)

// topoGroup counts, per domain of a topology key (a zone, a hostname, any
// label value), the pods that a selector picks. Pods with the same
// constraint share one group.
type topoGroup struct {
	id         string
	kind       topoKind
	key        string
	maxSkew    int32
	minDomains int32
	selector   labels.Selector
	namespaces map[string]bool // nil: every namespace
	// Spread only: which nodes' domains count (kube-scheduler's defaults:
	// node affinity honoured, taints ignored).
	honorAffinity, honorTaints bool
	// counts: selected pods per domain; selected: their sum.
	counts   map[string]int32
	selected int32
	// owners (anti-affinity only): pods carrying this anti-affinity, per
	// domain; a pod the selector picks must stay out of those domains.
	owners map[string]int32
	// open indexes the claims of this solve that hold no selected pod yet,
	// for hostname groups that block a second one (see blocking); nil for
	// other groups.
	open *claimIndex
}

// placeholderPrefix starts the hostname a claim has until its node exists.
const placeholderPrefix = "hostname-placeholder-"

// blocking reports whether the group keeps a pod it selects off any node
// that already holds one: hostname anti-affinity, or a hostname spread of
// maxSkew 1 (a new node is always an empty domain, so the minimum is 0).
func (g *topoGroup) blocking() bool {
	return g.key == corev1.LabelHostname && (g.kind == topoAntiAffinity || (g.kind == topoSpread && g.maxSkew == 1))
}

// openIndex returns, for a constraint that keeps the pod off claims already
// holding a selected pod, the index of the claims still open to it.
func (c constraint) openIndex(p *podState) *claimIndex {
	if c.inverse || c.g.open == nil || (c.g.kind == topoSpread && !c.g.selects(p.pod)) {
		return nil
	}
	return c.g.open
}

func (g *topoGroup) selects(p *corev1.Pod) bool {
	if g.namespaces != nil && !g.namespaces[p.Namespace] {
		return false
	}
	return g.selector.Matches(labels.Set(p.Labels))
}

// ignoredForTopology: pods that no longer occupy a domain.
func ignoredForTopology(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// topology holds every group of one solve.
type topology struct {
	groups map[string]*topoGroup
	// namespaceLabels resolves namespaceSelectors.
	namespaceLabels map[string]map[string]string
}

// group returns the shared group for a constraint, creating it.
func (t *topology) group(g *topoGroup) *topoGroup {
	var ns []string
	for n := range g.namespaces {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	g.id = fmt.Sprintf("%d|%s|%d|%d|%s|%v|%t|%t|%s", g.kind, g.key, g.maxSkew, g.minDomains, g.selector, g.namespaces == nil, g.honorAffinity, g.honorTaints, strings.Join(ns, ","))
	if existing, ok := t.groups[g.id]; ok {
		return existing
	}
	g.counts, g.owners = map[string]int32{}, map[string]int32{}
	t.groups[g.id] = g
	return g
}

// spreadGroups builds the groups of a pod's topology spread constraints,
// split into hard (DoNotSchedule) and soft (ScheduleAnyway) ones.
func (t *topology) spreadGroups(p *corev1.Pod) (hard, soft []*topoGroup, err error) {
	for i, c := range p.Spec.TopologySpreadConstraints {
		sel, err := selectorWithKeys(c.LabelSelector, c.MatchLabelKeys, p.Labels)
		if err != nil {
			return nil, nil, fmt.Errorf("topologySpreadConstraints[%d]: %w", i, err)
		}
		minDomains := int32(1)
		if c.MinDomains != nil {
			minDomains = *c.MinDomains
		}
		g := t.group(&topoGroup{
			kind: topoSpread, key: c.TopologyKey, maxSkew: c.MaxSkew, minDomains: minDomains, selector: sel,
			namespaces:    map[string]bool{p.Namespace: true},
			honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
			honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		})
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			soft = append(soft, g)
		} else {
			hard = append(hard, g)
		}
	}
	return hard, soft, nil
}

// affinityGroup builds the group of one pod (anti-)affinity term.
func (t *topology) affinityGroup(p *corev1.Pod, kind topoKind, term corev1.PodAffinityTerm) (*topoGroup, error) {
	sel, err := selectorWithKeys(term.LabelSelector, term.MatchLabelKeys, p.Labels)
	if err != nil {
		return nil, err
	}
	if len(term.MismatchLabelKeys) > 0 {
		reqs := make([]labels.Requirement, 0, len(term.MismatchLabelKeys))
		for _, k := range term.MismatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
				if err != nil {
					return nil, err
				}
				reqs = append(reqs, *r)
			}
		}
		sel = sel.Add(reqs...)
	}
	namespaces, err := t.termNamespaces(p, term)
	if err != nil {
		return nil, err
	}
	return t.group(&topoGroup{kind: kind, key: term.TopologyKey, selector: sel, namespaces: namespaces}), nil
}

// termNamespaces: the term's namespaces, those its namespaceSelector picks,
// or the pod's own namespace when neither is given; nil means all.
func (t *topology) termNamespaces(p *corev1.Pod, term corev1.PodAffinityTerm) (map[string]bool, error) {
	if term.NamespaceSelector == nil {
		if len(term.Namespaces) == 0 {
			return map[string]bool{p.Namespace: true}, nil
		}
		return setOf(term.Namespaces), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	if sel.Empty() {
		return nil, nil
	}
	out := setOf(term.Namespaces)
	for ns, l := range t.namespaceLabels {
		if sel.Matches(labels.Set(l)) {
			out[ns] = true
		}
	}
	return out, nil
}

func setOf(xs []string) map[string]bool {
	out := make(map[string]bool, len(xs))
	for _, x := range xs {
		out[x] = true
	}
	return out
}

// selectorWithKeys converts a label selector, adding `key In [pod's value]`
// for each matchLabelKeys key the pod carries. A nil selector selects nothing.
func selectorWithKeys(ls *metav1.LabelSelector, keys []string, podLabels map[string]string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("labelSelector: %w", err)
	}
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, fmt.Errorf("matchLabelKeys: %w", err)
			}
			sel = sel.Add(*r)
		}
	}
	return sel, nil
}

// record counts a placed pod in the domains it now occupies: in every group
// that selects it and, for its own anti-affinity, as an owner.
func (s *solver) record(p *podState, domainsOf func(key string) []string) {
	if ignoredForTopology(p.pod) {
		return
	}
	for _, g := range p.matched {
		ds := domainsOf(g.key)
		// An undecided domain counts only where it can only block: for
		// anti-affinity, in every domain the pod might take.
		if len(ds) == 1 || (g.kind == topoAntiAffinity && len(ds) > 1) {
			g.selected++
			for _, d := range ds {
				g.counts[d]++
				if g.counts[d] == 1 && g.open != nil {
					if c, ok := s.claimByHost[d]; ok {
						g.open.remove(c)
					}
				}
			}
		}
	}
	// Only required anti-affinity keeps other pods away (kube-scheduler
	// enforces it both ways); preferred anti-affinity does not.
	for _, g := range p.antis {
		for _, d := range domainsOf(g.key) {
			g.owners[d]++
		}
	}
}

// constraint is one active topology constraint of a pod.
type constraint struct {
	g *topoGroup
	// inverse: the pod is kept out of the domains of others' anti-affinity.
	inverse bool
}

// allows reports whether the pod may take domain d.
func (s *solver) allows(p *podState, c constraint, d string) bool {
	g := c.g
	if c.inverse {
		return g.owners[d] == 0
	}
	switch g.kind {
	case topoAntiAffinity:
		return g.counts[d] == 0
	case topoAffinity:
		if g.counts[d] > 0 {
			return true
		}
		// The first pod of a group that selects itself may start anywhere.
		return g.selects(p.pod) && g.selected == 0
	}
	self := int32(0)
	if g.selects(p.pod) {
		self = 1
	}
	return g.counts[d]+self-s.spreadMin(p, g) <= g.maxSkew
}

// spreadMin is the smallest count over the domains the pod could reach, or 0
// when fewer than minDomains exist or the key is hostname (a new node is
// always an empty domain).
func (s *solver) spreadMin(p *podState, g *topoGroup) int32 {
	if g.key == corev1.LabelHostname {
		return 0
	}
	domains := s.eligibleDomains(p, g)
	if int32(len(domains)) < g.minDomains || len(domains) == 0 {
		return 0
	}
	m := g.counts[domains[0]]
	for _, d := range domains[1:] {
		m = min(m, g.counts[d])
	}
	return m
}

// eligibleDomains: the domains of the key on nodes the pod could use (by its
// node affinity and, if honoured, taints) and from NodePools it could launch.
func (s *solver) eligibleDomains(p *podState, g *topoGroup) []string {
	if d, ok := p.eligible[g]; ok {
		return d
	}
	seen := map[string]bool{}
	strict := p.strictRequirements()
	for _, ns := range s.nodes {
		d, ok := nodeDomain(ns.node, g.key)
		if !ok || (g.honorAffinity && strict.Matches(ns.node.Labels) != nil) {
			continue
		}
		if _, bad := untolerated(ns.taints, p.tolerations); bad && g.honorTaints {
			continue
		}
		seen[d] = true
	}
	for _, ps := range s.pools {
		if ps.invalid != nil || (g.honorAffinity && ps.reqs.Compatible(strict, s.wellKnown) != nil) {
			continue
		}
		if _, bad := untolerated(ps.taints, p.tolerations); bad && g.honorTaints {
			continue
		}
		for _, d := range ps.domains(g.key) {
			if !g.honorAffinity || reqAllows(strict, g.key, d) {
				seen[d] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	if p.eligible == nil {
		p.eligible = map[*topoGroup][]string{}
	}
	p.eligible[g] = out
	return out
}

func reqAllows(reqs requirement.Requirements, key, value string) bool {
	r, ok := reqs.Get(key)
	return !ok || r.Has(value)
}

// domains lists the values a pool's nodes can take for a key: the types'
// values, or, for a key no type defines, the values the pool's own
// requirements and template labels give its nodes.
func (ps *poolState) domains(key string) []string {
	if d, ok := ps.domainCache[key]; ok {
		return d
	}
	var own []string
	if r, ok := ps.reqs.Get(key); ok {
		if vals, finite := r.Values(); finite {
			own = vals
		}
	}
	seen := map[string]bool{}
	for _, t := range ps.types {
		ds := typeDomains(t, key)
		if len(ds) == 0 {
			ds = own
		}
		for _, d := range ds {
			if reqAllows(ps.reqs, key, d) {
				seen[d] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	if ps.domainCache == nil {
		ps.domainCache = map[string][]string{}
	}
	ps.domainCache[key] = out
	return out
}

// typeDomains: the values a node of this type can have for key.
func typeDomains(t *typeState, key string) []string {
	switch key {
	case corev1.LabelInstanceTypeStable:
		return []string{t.it.Name}
	case corev1.LabelTopologyZone:
		return t.zones
	case "karpenter.sh/capacity-type":
		return t.capacityTypes
	}
	if v, ok := t.it.Labels[key]; ok {
		return []string{v}
	}
	return nil
}

// nodeDomain: an existing node's value for a key; hostname falls back to the
// node's name.
func nodeDomain(n *Node, key string) (string, bool) {
	if v, ok := n.Labels[key]; ok {
		return v, true
	}
	if key == corev1.LabelHostname {
		return n.Name, true
	}
	return "", false
}

// nodeAllows checks every active constraint against an existing node.
func (s *solver) nodeAllows(p *podState, n *Node) bool {
	for _, c := range p.constraints() {
		d, ok := nodeDomain(n, c.g.key)
		if !ok {
			if c.inverse || c.g.kind == topoAntiAffinity {
				continue // a node outside the key's domains cannot conflict
			}
			return false
		}
		if !s.allows(p, c, d) {
			return false
		}
	}
	return true
}

// narrow applies the pod's constraints to a claim-to-be: for each key it
// keeps the domains every constraint allows; where a spread or affinity
// constraint is involved it settles on one domain (for spread the emptiest,
// for affinity the fullest). It returns the narrowed requirements, or false.
func (s *solver) narrow(p *podState, reqs requirement.Requirements, types []*typeState, hostname string) (requirement.Requirements, bool) {
	cs := p.constraints()
	if len(cs) == 0 {
		return reqs, true
	}
	byKey := map[string][]constraint{}
	var keys []string
	for _, c := range cs {
		if _, ok := byKey[c.g.key]; !ok {
			keys = append(keys, c.g.key)
		}
		byKey[c.g.key] = append(byKey[c.g.key], c)
	}
	slices.Sort(keys)
	out := reqs
	for _, key := range keys {
		var possible []string
		switch r, ok := out.Get(key); {
		case key == corev1.LabelHostname:
			possible = []string{hostname}
		case ok && r.Single() != "":
			possible = []string{r.Single()} // already settled (the types meet it)
		default:
			possible = claimDomains(out, types, key)
		}
		var allowed []string
		for _, d := range possible {
			ok := true
			for _, c := range byKey[key] {
				ok = ok && s.allows(p, c, d)
			}
			if ok {
				allowed = append(allowed, d)
			}
		}
		if len(allowed) == 0 {
			return requirement.Requirements{}, false
		}
		if key == corev1.LabelHostname {
			continue
		}
		if pick := s.settle(byKey[key], allowed); pick != "" {
			allowed = []string{pick}
		}
		out = out.Clone()
		out.Add(requirement.MustNew(key, corev1.NodeSelectorOpIn, allowed...))
	}
	return out, true
}

// settle picks the one domain the pod will occupy, so that it is counted
// exactly: for spread the emptiest allowed domain, for affinity the fullest,
// for anti-affinity the first allowed one. Keys with only inverse
// constraints (the pod avoids others) stay open: any allowed domain will do.
func (s *solver) settle(cs []constraint, allowed []string) string {
	for _, c := range cs {
		if c.inverse {
			continue
		}
		switch c.g.kind {
		case topoSpread:
			return slices.MinFunc(allowed, func(a, b string) int {
				return cmp.Or(cmp.Compare(c.g.counts[a], c.g.counts[b]), cmp.Compare(a, b))
			})
		case topoAffinity:
			return slices.MinFunc(allowed, func(a, b string) int {
				return cmp.Or(cmp.Compare(c.g.counts[b], c.g.counts[a]), cmp.Compare(a, b))
			})
		case topoAntiAffinity:
			return allowed[0]
		}
	}
	return ""
}

// topoReason names the first topology constraint no domain can satisfy for
// the pod on a new node from these types, or "" when they all can.
func (s *solver) topoReason(p *podState, reqs requirement.Requirements, types []*typeState) string {
	for _, c := range p.constraints() {
		possible := []string{"hostname-placeholder-explain"}
		if c.g.key != corev1.LabelHostname {
			possible = claimDomains(reqs, types, c.g.key)
		}
		if slices.ContainsFunc(possible, func(d string) bool { return s.allows(p, c, d) }) {
			continue
		}
		switch {
		case c.inverse:
			return fmt.Sprintf("every %s domain holds a pod whose anti-affinity excludes this pod", c.g.key)
		case c.g.kind == topoAntiAffinity:
			return fmt.Sprintf("pod anti-affinity on %s: every domain already holds a matching pod", c.g.key)
		case c.g.kind == topoAffinity:
			return fmt.Sprintf("pod affinity on %s: no domain holds a pod matching %s", c.g.key, c.g.selector)
		default:
			return fmt.Sprintf("topology spread on %s (maxSkew %d) cannot be met in %v", c.g.key, c.g.maxSkew, possible)
		}
	}
	return ""
}

// claimDomains: the values a claim can still take for key, given its
// requirements and candidate types.
func claimDomains(reqs requirement.Requirements, types []*typeState, key string) []string {
	if r, ok := reqs.Get(key); ok && r.Single() != "" {
		return []string{r.Single()} // settled; the candidate types meet it
	}
	admits := offeringFilter(reqs)
	seen := map[string]bool{}
	for _, t := range types {
		if key == corev1.LabelTopologyZone {
			for _, o := range t.offerings {
				if admits(o) {
					seen[o.Zone] = true
				}
			}
			continue
		}
		for _, d := range typeDomains(t, key) {
			if reqAllows(reqs, key, d) {
				seen[d] = true
			}
		}
	}
	if r, ok := reqs.Get(key); ok {
		if values, finite := r.Values(); finite && len(seen) == 0 {
			for _, v := range values {
				seen[v] = true // a template label, not an instance-type one
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
