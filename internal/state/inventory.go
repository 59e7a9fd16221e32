package state

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Inventory is what the cluster holds right now, for reporting (metrics):
// every node with its NodeClaim and pods, NodeClaims with no node yet, and
// every pod. Objects are shared with the model: read them, never modify.
type Inventory struct {
	Nodes []NodeView
	// Pending are NodeClaims whose node has not registered.
	Pending []*karpv1.NodeClaim
	Pods    []*corev1.Pod
	// NodePools by name.
	NodePools map[string]*karpv1.NodePool
	// Namespaces (labels) and storage, as in a Snapshot.
	Namespaces             map[string]map[string]string
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
}

// NodeView is a node, its NodeClaim (nil for a node Nodewright does not
// manage) and the non-terminal pods bound to it.
type NodeView struct {
	Node  *corev1.Node
	Claim *karpv1.NodeClaim
	Pods  []*corev1.Pod
}

// placement returns what constrains where pods go besides nodes: namespace
// labels and storage. The caller holds the read lock.
func (c *Cluster) placement() (map[string]map[string]string, []*corev1.PersistentVolumeClaim, []*corev1.PersistentVolume, []*storagev1.StorageClass) {
	namespaces := make(map[string]map[string]string, len(c.namespaces))
	for ns, l := range c.namespaces {
		namespaces[ns] = l
	}
	var pvcs []*corev1.PersistentVolumeClaim
	for _, k := range sortedKeys(c.claims, types.NamespacedName.String) {
		pvcs = append(pvcs, c.claims[k])
	}
	var pvs []*corev1.PersistentVolume
	for _, k := range sortedKeys(c.volumes, name) {
		pvs = append(pvs, c.volumes[k])
	}
	var classes []*storagev1.StorageClass
	for _, k := range sortedKeys(c.storageClasses, name) {
		classes = append(classes, c.storageClasses[k])
	}
	return namespaces, pvcs, pvs, classes
}

// ClaimOfNode names the NodeClaim a node registered for, or "".
func (c *Cluster) ClaimOfNode(node string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[node]
	for name, nc := range c.nodeClaims {
		if nc.Status.NodeName == node || n != nil && n.Spec.ProviderID != "" && nc.Status.ProviderID == n.Spec.ProviderID {
			return name
		}
	}
	return ""
}

// Inventory returns the current holdings, nodes and pods sorted by name.
func (c *Cluster) Inventory() Inventory {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var inv Inventory
	bound := map[string][]*corev1.Pod{}
	keys := make([]types.NamespacedName, 0, len(c.pods))
	for k := range c.pods {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, k := range keys {
		p := c.pods[k]
		inv.Pods = append(inv.Pods, p)
		if p.Spec.NodeName != "" && !isTerminal(p) {
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		}
	}
	claimOf := map[string]*karpv1.NodeClaim{}
	for _, name := range sortedKeys(c.nodeClaims, name) {
		nc := c.nodeClaims[name]
		if nc.Status.ProviderID != "" {
			claimOf[nc.Status.ProviderID] = nc
		}
	}
	registered := map[*karpv1.NodeClaim]bool{}
	for _, name := range sortedKeys(c.nodes, name) {
		n := c.nodes[name]
		nc := claimOf[n.Spec.ProviderID]
		if n.Spec.ProviderID == "" {
			nc = nil
		}
		registered[nc] = true
		inv.Nodes = append(inv.Nodes, NodeView{Node: n, Claim: nc, Pods: bound[name]})
	}
	for _, name := range sortedKeys(c.nodeClaims, name) {
		if nc := c.nodeClaims[name]; !registered[nc] {
			inv.Pending = append(inv.Pending, nc)
		}
	}
	inv.Namespaces, inv.PersistentVolumeClaims, inv.PersistentVolumes, inv.StorageClasses = c.placement()
	inv.NodePools = make(map[string]*karpv1.NodePool, len(c.nodePools))
	for name, np := range c.nodePools {
		inv.NodePools[name] = np
	}
	return inv
}
