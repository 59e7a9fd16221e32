package state

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Cluster is the model. All methods are safe for concurrent use.
type Cluster struct {
	clock clock.Clock

	mu             sync.RWMutex
	nodes          map[string]*corev1.Node
	nodeClaims     map[string]*karpv1.NodeClaim
	pods           map[types.NamespacedName]*corev1.Pod
	nodePools      map[string]*karpv1.NodePool
	daemonSets     map[types.NamespacedName]*appsv1.DaemonSet
	namespaces     map[string]map[string]string
	claims         map[types.NamespacedName]*corev1.PersistentVolumeClaim
	volumes        map[string]*corev1.PersistentVolume
	storageClasses map[string]*storagev1.StorageClass
	// nominated: pods a decision planned a place for, until when, and where.
	nominated map[types.NamespacedName]nomination
	// version counts changes, so a consumer can tell nothing changed.
	version uint64
	// sync says whether the model is complete (synced.go).
	sync syncGate
	// nextProvisionable caches NextProvisionable.
	nextProvisionable cachedTime
	// up: the nodes able to take pods, with the taints that keep pods off
	// them (rejection.go).
	up map[string][]corev1.Taint
	// missingSince: since when each NodeClaim or Node of the model
	// ("NodeClaim/name", "Node/name") has been missing from the API
	// (ForgetMissing).
	missingSince map[string]time.Time
}

// nomination is a pod's planned place and how long it holds.
type nomination struct {
	until  time.Time
	target string // the NodeClaim or node planned for
}

// NewCluster returns an empty model on clk. It has not synced until its
// feed says so (SetSyncedFunc, MarkSynced).
func NewCluster(clk clock.Clock) *Cluster {
	return &Cluster{
		clock:          clk,
		nodes:          map[string]*corev1.Node{},
		nodeClaims:     map[string]*karpv1.NodeClaim{},
		pods:           map[types.NamespacedName]*corev1.Pod{},
		nodePools:      map[string]*karpv1.NodePool{},
		daemonSets:     map[types.NamespacedName]*appsv1.DaemonSet{},
		namespaces:     map[string]map[string]string{},
		claims:         map[types.NamespacedName]*corev1.PersistentVolumeClaim{},
		volumes:        map[string]*corev1.PersistentVolume{},
		storageClasses: map[string]*storagev1.StorageClass{},
		nominated:      map[types.NamespacedName]nomination{},
		up:             map[string][]corev1.Taint{},
		sync:           syncGate{unsyncedSince: clk.Now()},
	}
}

func key(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// upsert stores obj under k, or removes k when obj is nil.
func upsert[K comparable, V any](c *Cluster, m map[K]*V, k K, obj *V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	if obj == nil {
		delete(m, k)
		return
	}
	m[k] = obj
}

// UpdateNode records a Node; DeleteNode forgets it.
func (c *Cluster) UpdateNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.nodes[n.Name] = n
	c.trackNode(n.Name, n)
}
func (c *Cluster) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	delete(c.nodes, name)
	c.trackNode(name, nil)
}

// UpdateNodeClaim records a NodeClaim; DeleteNodeClaim forgets it, and the
// nominations of pods planned onto it (they need a place again now, not
// when the nomination would have expired).
func (c *Cluster) UpdateNodeClaim(nc *karpv1.NodeClaim) { upsert(c, c.nodeClaims, nc.Name, nc) }
func (c *Cluster) DeleteNodeClaim(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	delete(c.nodeClaims, name)
	for k, n := range c.nominated {
		if n.target == name {
			delete(c.nominated, k)
		}
	}
}

// UpdatePod records a pod; DeletePod forgets it (and its nomination). A
// pod kube-scheduler reports unschedulable while its planned node is up
// loses its nomination (rejection.go).
func (c *Cluster) UpdatePod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	k := key(p.Namespace, p.Name)
	old := c.pods[k]
	c.pods[k] = p
	c.releaseRejected(k, old, p)
}
func (c *Cluster) DeletePod(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	delete(c.pods, key(namespace, name))
	delete(c.nominated, key(namespace, name))
}

// UpdateNodePool records a NodePool; DeleteNodePool forgets it.
func (c *Cluster) UpdateNodePool(np *karpv1.NodePool) { upsert(c, c.nodePools, np.Name, np) }
func (c *Cluster) DeleteNodePool(name string) {
	upsert[string, karpv1.NodePool](c, c.nodePools, name, nil)
}

// UpdateDaemonSet records a DaemonSet; DeleteDaemonSet forgets it.
func (c *Cluster) UpdateDaemonSet(ds *appsv1.DaemonSet) {
	upsert(c, c.daemonSets, key(ds.Namespace, ds.Name), ds)
}
func (c *Cluster) DeleteDaemonSet(namespace, name string) {
	upsert[types.NamespacedName, appsv1.DaemonSet](c, c.daemonSets, key(namespace, name), nil)
}

// UpdateNamespace records a namespace's labels; DeleteNamespace forgets it.
func (c *Cluster) UpdateNamespace(ns *corev1.Namespace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.namespaces[ns.Name] = ns.Labels
}
func (c *Cluster) DeleteNamespace(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	delete(c.namespaces, name)
}

// UpdatePersistentVolumeClaim, UpdatePersistentVolume and UpdateStorageClass
// record storage objects; the Delete forms forget them.
func (c *Cluster) UpdatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	upsert(c, c.claims, key(pvc.Namespace, pvc.Name), pvc)
}
func (c *Cluster) DeletePersistentVolumeClaim(namespace, name string) {
	upsert[types.NamespacedName, corev1.PersistentVolumeClaim](c, c.claims, key(namespace, name), nil)
}
func (c *Cluster) UpdatePersistentVolume(pv *corev1.PersistentVolume) {
	upsert(c, c.volumes, pv.Name, pv)
}
func (c *Cluster) DeletePersistentVolume(name string) {
	upsert[string, corev1.PersistentVolume](c, c.volumes, name, nil)
}
func (c *Cluster) UpdateStorageClass(sc *storagev1.StorageClass) {
	upsert(c, c.storageClasses, sc.Name, sc)
}
func (c *Cluster) DeleteStorageClass(name string) {
	upsert[string, storagev1.StorageClass](c, c.storageClasses, name, nil)
}

// Nominate records that a decision planned a place (target: a NodeClaim or
// node name) for these pods; they are not provisionable again until ttl
// passes, kube-scheduler binds them, the target NodeClaim is deleted, or
// kube-scheduler rejects them once the target node is up.
func (c *Cluster) Nominate(pods []*corev1.Pod, target string, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	until := c.clock.Now().Add(ttl)
	for _, p := range pods {
		c.nominated[key(p.Namespace, p.Name)] = nomination{until: until, target: target}
	}
}

// Version changes whenever the model does.
func (c *Cluster) Version() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

// NominatedTo returns the pods a live nomination plans onto target (a
// NodeClaim or node name), sorted.
func (c *Cluster) NominatedTo(target string) []types.NamespacedName {
	now := c.clock.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []types.NamespacedName
	for k, n := range c.nominated {
		if n.target == target && now.Before(n.until) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// PendingNominations reports whether a pod that is not bound yet has a
// live nomination: capacity is being provisioned for pending pods. (Pods
// still running on a node going away hold nominations to their new room
// for as long as the drain lasts; they are not pending.)
func (c *Cluster) PendingNominations() bool {
	now := c.clock.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k, n := range c.nominated {
		if p, ok := c.pods[k]; ok && p.Spec.NodeName == "" && now.Before(n.until) {
			return true
		}
	}
	return false
}

// NominationTargets returns the targets (NodeClaim or node names) of the
// live nominations.
func (c *Cluster) NominationTargets() map[string]bool {
	now := c.clock.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]bool{}
	for _, n := range c.nominated {
		if now.Before(n.until) {
			out[n.target] = true
		}
	}
	return out
}

// NextProvisionable is the earliest time a pod not provisionable now
// becomes so without any event: a nomination lapsing, or a pod
// kube-scheduler has not looked at reaching SchedulerBacklogGrace. False
// when no such time is ahead.
func (c *Cluster) NextProvisionable() (time.Time, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Asked at every turn of the simulator's loop: the answer stands while
	// the model has not changed and its time is still ahead.
	if n := c.nextProvisionable; n.version == c.version && (n.at.IsZero() || now.Before(n.at)) {
		return n.at, !n.at.IsZero()
	}
	next := c.computeNextProvisionable(now)
	c.nextProvisionable = cachedTime{version: c.version, at: next}
	return next, !next.IsZero()
}

// computeNextProvisionable is NextProvisionable's answer; c.mu is held.
func (c *Cluster) computeNextProvisionable(now time.Time) time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if now.Before(t) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, n := range c.nominated {
		earlier(n.until)
	}
	for _, p := range c.pods {
		if at, ok := schedulerBehindAt(p); ok {
			earlier(at)
		}
	}
	return next
}

// cachedTime is a time worked out from the model at version.
type cachedTime struct {
	version uint64
	at      time.Time
}

// NominationOf returns the target of a pod's live nomination, or "".
func (c *Cluster) NominationOf(namespace, name string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n, ok := c.nominated[key(namespace, name)]; ok && c.clock.Now().Before(n.until) {
		return n.target
	}
	return ""
}

// Provisionable reports whether a pod is waiting for capacity:
// kube-scheduler marked it Unschedulable, or has not looked at it for
// SchedulerBacklogGrace (backlog.go); it is not bound, not nominated to a
// node (by kube-scheduler or by a recent decision), not terminal or
// terminating, and not a DaemonSet or mirror pod.
func (c *Cluster) Provisionable(p *corev1.Pod) bool {
	now := c.clock.Now()
	c.mu.RLock()
	n, nominated := c.nominated[key(p.Namespace, p.Name)]
	c.mu.RUnlock()
	if nominated && now.Before(n.until) {
		return false
	}
	return provisionable(p, now)
}

// AnyProvisionable reports whether some pod is provisionable now, or must
// move off a node going away (Snapshot.Evicting) with no home planned.
func (c *Cluster) AnyProvisionable() bool {
	now := c.clock.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var away map[string]bool
	for k, p := range c.pods {
		if n, ok := c.nominated[k]; ok && now.Before(n.until) {
			continue
		}
		if provisionable(p, now) {
			return true
		}
		if p.Spec.NodeName != "" && reschedulable(p) {
			if away == nil {
				away = c.goingAway()
			}
			if away[p.Spec.NodeName] {
				return true
			}
		}
	}
	return false
}

// goingAway returns the nodes whose pods need a new home before they are
// evicted: the node or its NodeClaim is being deleted, or disruption has
// tainted it (karpenter.sh/disrupted). A cordoned node is not one: its pods
// stay until someone drains it. c.mu is held.
func (c *Cluster) goingAway() map[string]bool {
	out := map[string]bool{}
	for _, n := range c.nodes {
		if n.DeletionTimestamp != nil || disrupted(n) {
			out[n.Name] = true
		}
	}
	for _, nc := range c.nodeClaims {
		if nc.DeletionTimestamp == nil {
			continue
		}
		if name := c.nodeOfClaim(nc.Status.NodeName, nc.Status.ProviderID); name != "" {
			out[name] = true
		}
	}
	return out
}

// reschedulable: a pod bound to a node that goes away will need room
// elsewhere, as Karpenter counts it: not terminal, not terminating unless a
// StatefulSet owns it (its replacement is created only once it is gone;
// another controller's replacement is already pending and counted), not a
// DaemonSet or mirror pod, and not tolerating the disrupted taint (it would
// stay to the end).
func reschedulable(p *corev1.Pod) bool {
	if isTerminal(p) || ownedBy(p, "DaemonSet") || ownedBy(p, "Node") || (p.DeletionTimestamp != nil && !ownedBy(p, "StatefulSet")) {
		return false
	}
	return !schedcorev1.TolerationsTolerateTaint(logr.Discard(), p.Spec.Tolerations, &karpv1.DisruptedNoScheduleTaint, true)
}

// disrupted: disruption has tainted the node (karpenter.sh/disrupted).
func disrupted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintKeyDisrupted })
}

func provisionable(p *corev1.Pod, now time.Time) bool {
	if p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" || p.DeletionTimestamp != nil ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || ownedBy(p, "DaemonSet") || ownedBy(p, "Node") {
		return false
	}
	return unschedulableCondition(p) != nil || SchedulerBehind(p, now)
}

func ownedBy(p *corev1.Pod, kind string) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == kind && o.Controller != nil && *o.Controller })
}

// initialized reports whether a NodeClaim's node has finished starting:
// the claim's Initialized condition, or the node's karpenter.sh/initialized
// label (both are set together; a node read from manifests may carry only
// the label, which is what Karpenter reads).
func initialized(nc *karpv1.NodeClaim, n *corev1.Node) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) ||
		(n != nil && n.Labels[karpv1.LabelNodeInitialized] == "true")
}

// isDeleting: marked for deletion, or tainted as being disrupted.
func isDeleting(n *corev1.Node, nc *karpv1.NodeClaim) bool {
	if nc != nil && nc.DeletionTimestamp != nil {
		return true
	}
	if n == nil {
		return false
	}
	return n.DeletionTimestamp != nil || n.Spec.Unschedulable || disrupted(n)
}

// isTerminal: pods that hold no resources.
func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
