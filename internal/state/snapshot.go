package state

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/sched/resources"
)

// Snapshot is one consistent view for a provisioning decision. Its objects
// are shared with the model: read them, never modify them.
type Snapshot struct {
	// Pending are the provisionable pods.
	Pending []*corev1.Pod
	// Evicting are pods bound to a node going away (it or its NodeClaim is
	// being deleted, or disruption tainted it) that will need room
	// elsewhere and have none planned yet: provisioning solves for them
	// with the pending pods, as Karpenter does, so their new room is on its
	// way before they are evicted. They stay in their node's Pods too.
	Evicting []*corev1.Pod
	// Nodes are existing capacity: registered nodes (with their pods) and
	// launched NodeClaims whose node has not registered yet (InFlight).
	Nodes []sched.Node
	// NodePools are the pools that are not being deleted, by name.
	NodePools []*karpv1.NodePool
	// Usage is, per NodePool, the capacity of its nodes and launched
	// NodeClaims, with a "nodes" count.
	Usage map[string]corev1.ResourceList
	// Launching are, per NodePool, NodeClaims not launched yet (those being
	// deleted included: one may own an instance whose launch answer was
	// lost): their capacity is not known, and a caller counts them by their
	// largest instance-type option.
	Launching map[string][]*karpv1.NodeClaim
	// Unlaunched are those NodeClaims (not being deleted) as capacity on
	// its way, for provisioning (in-flight, after the launched ones): the
	// room each was sized for (spec.resources.requests, which every
	// instance-type option holds) with the pods nominated onto it, and its
	// requirements (sched.Node.Requirements). A pod they take is not
	// bought for twice, even after a restart forgot the nominations. They
	// are not in Nodes: disruption never counts on capacity that may not
	// come.
	Unlaunched []sched.Node
	// DaemonSetPods: one pod per DaemonSet, from its template.
	DaemonSetPods []*corev1.Pod
	// Namespaces (labels) and storage, for the solver's affinity and volume
	// topology.
	Namespaces             map[string]map[string]string
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// moving are the pods of nodes going away that need room elsewhere
	// (Evicting, and those already nominated to their new room).
	moving map[*corev1.Pod]bool
}

// Snapshot returns the current view.
func (c *Cluster) Snapshot() Snapshot {
	now := c.clock.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	snap := Snapshot{Usage: map[string]corev1.ResourceList{}, Launching: map[string][]*karpv1.NodeClaim{}}

	bound := map[string][]*corev1.Pod{}
	away := c.goingAway()
	for k, p := range c.pods {
		switch {
		case p.Spec.NodeName != "":
			if isTerminal(p) {
				continue
			}
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
			if !away[p.Spec.NodeName] || !reschedulable(p) {
				continue
			}
			if snap.moving == nil {
				snap.moving = map[*corev1.Pod]bool{}
			}
			snap.moving[p] = true
			if n, ok := c.nominated[k]; ok && now.Before(n.until) {
				bound[n.target] = append(bound[n.target], p) // its new home is held for it
			} else {
				snap.Evicting = append(snap.Evicting, p)
			}
		case p.Status.NominatedNodeName != "" && p.DeletionTimestamp == nil && !isTerminal(p):
			// kube-scheduler keeps a nominated pod's room on that node for
			// it (preemption, or a plan Nodewright handed over): so do we.
			bound[p.Status.NominatedNodeName] = append(bound[p.Status.NominatedNodeName], p)
		case provisionable(p, now):
			if n, ok := c.nominated[k]; ok && now.Before(n.until) {
				// Planned onto a node or claim: it holds its place there,
				// so the next decision does not give that room away.
				bound[n.target] = append(bound[n.target], p)
			} else {
				snap.Pending = append(snap.Pending, p)
			}
		}
	}
	byName := func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	}
	slices.SortFunc(snap.Pending, byName)
	slices.SortFunc(snap.Evicting, byName)

	byProviderID := map[string]*corev1.Node{}
	for _, n := range c.nodes {
		if n.Spec.ProviderID != "" {
			byProviderID[n.Spec.ProviderID] = n
		}
	}
	claimed := map[string]bool{}
	for _, ncName := range sortedKeys(c.nodeClaims, name) {
		nc := c.nodeClaims[ncName]
		pool := nc.Labels[karpv1.LabelNodePool]
		node := byProviderID[nc.Status.ProviderID]
		if node == nil && nc.Status.NodeName != "" {
			node = c.nodes[nc.Status.NodeName]
		}
		switch {
		case node != nil:
			claimed[node.Name] = true
			snap.Nodes = append(snap.Nodes, sched.Node{
				Name: node.Name, Labels: node.Labels, Taints: node.Spec.Taints, Allocatable: allocatableOf(node, nc),
				Pods: podsOn(bound, node.Name, nc.Name), NodePool: pool, Initialized: initialized(nc, node), StartupTaints: nc.Spec.StartupTaints,
				MarkedForDeletion: isDeleting(node, nc),
			})
			addUsage(snap.Usage, pool, firstNonEmpty(node.Status.Capacity, nc.Status.Capacity))
		case len(nc.Status.Allocatable) > 0 || len(nc.Status.Capacity) > 0:
			// Launched: its capacity counts toward the pool's limits; its
			// room is what it reports allocatable (none until it does, as
			// in Karpenter).
			snap.Nodes = append(snap.Nodes, sched.Node{
				Name: nc.Name, Labels: sched.InFlightLabels(nc), Taints: nc.Spec.Taints, Allocatable: nc.Status.Allocatable,
				Pods: bound[nc.Name], NodePool: pool, StartupTaints: nc.Spec.StartupTaints, InFlight: true, MarkedForDeletion: isDeleting(nil, nc),
			})
			addUsage(snap.Usage, pool, nc.Status.Capacity)
		case pool != "":
			// Being deleted, it may still own an instance (a launch whose
			// answer was lost) until termination is done: limits count it,
			// but no pod is planned onto it.
			snap.Launching[pool] = append(snap.Launching[pool], nc)
			if nc.DeletionTimestamp == nil {
				snap.Unlaunched = append(snap.Unlaunched, sched.Node{
					Name: nc.Name, Labels: sched.InFlightLabels(nc), Taints: nc.Spec.Taints, Allocatable: nc.Spec.Resources.Requests,
					Pods: bound[nc.Name], NodePool: pool, StartupTaints: nc.Spec.StartupTaints, InFlight: true,
					Requirements: nc.Spec.Requirements,
				})
			}
		}
	}
	for _, nodeName := range sortedKeys(c.nodes, name) {
		n := c.nodes[nodeName]
		if claimed[nodeName] {
			continue
		}
		// A node no NodeClaim accounts for: unmanaged capacity, or a node
		// whose NodeClaim is gone (its pool still pays for it).
		pool := n.Labels[karpv1.LabelNodePool]
		snap.Nodes = append(snap.Nodes, sched.Node{
			Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: firstNonEmpty(n.Status.Allocatable, n.Status.Capacity),
			Pods: bound[n.Name], NodePool: pool, Initialized: true, MarkedForDeletion: isDeleting(n, nil),
		})
		if pool != "" {
			addUsage(snap.Usage, pool, n.Status.Capacity)
		}
	}

	for _, poolName := range sortedKeys(c.nodePools, name) {
		if np := c.nodePools[poolName]; np.DeletionTimestamp == nil {
			snap.NodePools = append(snap.NodePools, np)
		}
	}
	running := c.daemonSetPods()
	for _, k := range sortedKeys(c.daemonSets, types.NamespacedName.String) {
		ds := c.daemonSets[k]
		p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
		if existing := running[k]; existing != nil {
			// What a pod of it really asks (admission webhooks and
			// vertical autoscalers change requests); the affinity is the
			// template's: the DaemonSet controller pins each pod to its node.
			p.Spec = *existing.Spec.DeepCopy()
			p.Spec.Affinity = ds.Spec.Template.Spec.Affinity.DeepCopy()
			p.Spec.NodeName = ""
		}
		p.Name, p.Namespace = ds.Name, ds.Namespace
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: ds.Name, Controller: ptrTo(true)}}
		resources.DefaultRequests(p) // a template is not defaulted; its pods will be
		snap.DaemonSetPods = append(snap.DaemonSetPods, p)
	}
	snap.Namespaces, snap.PersistentVolumeClaims, snap.PersistentVolumes, snap.StorageClasses = c.placement()
	return snap
}

// Input turns the snapshot into the solver's input, given each pool's
// instance types and extra usage (e.g. launching NodeClaims counted by the
// caller).
func (s Snapshot) Input(pools []sched.NodePool) sched.Input {
	return sched.Input{
		Pods: s.Pending, Nodes: s.Nodes, NodePools: pools, DaemonSetPods: s.DaemonSetPods, Namespaces: s.Namespaces,
		PersistentVolumeClaims: s.PersistentVolumeClaims, PersistentVolumes: s.PersistentVolumes, StorageClasses: s.StorageClasses,
	}
}

// daemonSetPods returns, per DaemonSet, its newest pod that is not
// terminal or terminating; c.mu is held.
func (c *Cluster) daemonSetPods() map[types.NamespacedName]*corev1.Pod {
	out := map[types.NamespacedName]*corev1.Pod{}
	if len(c.daemonSets) == 0 {
		return out
	}
	for _, p := range c.pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "DaemonSet" || isTerminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		k := key(p.Namespace, ref.Name)
		if cur := out[k]; cur == nil || cur.CreationTimestamp.Before(&p.CreationTimestamp) ||
			cur.CreationTimestamp.Equal(&p.CreationTimestamp) && p.Name > cur.Name {
			out[k] = p
		}
	}
	return out
}

// ProvisioningInput is the solver's input for a provisioning decision:
// the nodes with the NodeClaims not launched yet after them, and the
// pending pods then the evicting ones as they will be once evicted (not
// bound, not nominated; copies). A pod leaving a node going away is taken
// off that node, so spreads and affinities count it once: where it goes.
func (s Snapshot) ProvisioningInput(pools []sched.NodePool) sched.Input {
	in := s.Input(pools)
	in.Nodes = append(slices.Clip(s.Nodes), s.Unlaunched...)
	if len(s.moving) > 0 {
		leaving := func(node string) func(*corev1.Pod) bool {
			return func(p *corev1.Pod) bool { return s.moving[p] && p.Spec.NodeName == node }
		}
		for i := range in.Nodes {
			// Only where it leaves: at its nominated new home it holds its room.
			if gone := leaving(in.Nodes[i].Name); slices.ContainsFunc(in.Nodes[i].Pods, gone) {
				in.Nodes[i].Pods = slices.DeleteFunc(slices.Clone(in.Nodes[i].Pods), gone)
			}
		}
	}
	if len(s.Evicting) > 0 {
		in.Pods = append(slices.Clip(s.Pending), make([]*corev1.Pod, 0, len(s.Evicting))...)
		for _, p := range s.Evicting {
			moved := p.DeepCopy()
			moved.Spec.NodeName, moved.Status.NominatedNodeName = "", ""
			in.Pods = append(in.Pods, moved)
		}
	}
	return in
}

// addUsage adds a node's capacity, and one node, to a pool's usage.
func addUsage(usage map[string]corev1.ResourceList, pool string, capacity corev1.ResourceList) {
	if pool != "" {
		usage[pool] = sched.AddNode(usage[pool], capacity)
	}
}

// allocatableOf is a managed node's room: what the node reports once
// initialized; before that, the NodeClaim's allocatable over whatever the
// starting node reports (a kubelet reports zero while its device plugins
// and resources come up), as Karpenter counts it.
func allocatableOf(node *corev1.Node, nc *karpv1.NodeClaim) corev1.ResourceList {
	if initialized(nc, node) || len(nc.Status.Allocatable) == 0 {
		return firstNonEmpty(node.Status.Allocatable, nc.Status.Allocatable)
	}
	out := node.Status.Allocatable.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range nc.Status.Allocatable {
		if !q.IsZero() {
			out[name] = q
		}
	}
	return out
}

func firstNonEmpty(lists ...corev1.ResourceList) corev1.ResourceList {
	for _, l := range lists {
		if len(l) > 0 {
			return l
		}
	}
	return nil
}

// sortedKeys returns m's keys ordered by their string form, for
// deterministic snapshots.
func sortedKeys[K comparable, V any](m map[K]V, str func(K) string) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(str(a), str(b)) })
	return keys
}

func name(s string) string { return s }

func ptrTo[T any](v T) *T { return &v }

// podsOn gathers the pods bound or nominated to a node and to its claim.
func podsOn(bound map[string][]*corev1.Pod, nodeName, claimName string) []*corev1.Pod {
	if nodeName == claimName {
		return bound[nodeName]
	}
	return append(slices.Clip(bound[nodeName]), bound[claimName]...)
}
