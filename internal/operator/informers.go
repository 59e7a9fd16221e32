package operator

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// ObservedKinds are the kinds the cluster model follows.
func ObservedKinds() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.Node{}, &karpv1.NodeClaim{}, &karpv1.NodePool{}, &appsv1.DaemonSet{},
		&corev1.Namespace{}, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &storagev1.StorageClass{}}
}

// Observe applies one change (obj created or updated, or deleted) to the
// cluster model, and triggers a provisioning batch when it may need a
// decision: a provisionable pod, a NodePool change, a NodeClaim gone (its
// pods need a place again). Objects of other kinds are ignored.
func Observe(cluster *state.Cluster, trigger func(), obj client.Object, deleted bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		if deleted {
			cluster.DeletePod(o.Namespace, o.Name)
		} else if cluster.UpdatePod(o); cluster.Provisionable(o) {
			trigger()
		}
	case *karpv1.NodeClaim:
		apply(deleted, o, cluster.UpdateNodeClaim, func(nc *karpv1.NodeClaim) { cluster.DeleteNodeClaim(nc.Name); trigger() })
	case *karpv1.NodePool:
		apply(deleted, o, func(np *karpv1.NodePool) { cluster.UpdateNodePool(np); trigger() }, func(np *karpv1.NodePool) { cluster.DeleteNodePool(np.Name) })
	case *corev1.Node:
		apply(deleted, o, cluster.UpdateNode, func(n *corev1.Node) { cluster.DeleteNode(n.Name) })
	case *appsv1.DaemonSet:
		apply(deleted, o, cluster.UpdateDaemonSet, func(ds *appsv1.DaemonSet) { cluster.DeleteDaemonSet(ds.Namespace, ds.Name) })
	case *corev1.Namespace:
		apply(deleted, o, cluster.UpdateNamespace, func(ns *corev1.Namespace) { cluster.DeleteNamespace(ns.Name) })
	case *corev1.PersistentVolumeClaim:
		apply(deleted, o, cluster.UpdatePersistentVolumeClaim, func(c *corev1.PersistentVolumeClaim) { cluster.DeletePersistentVolumeClaim(c.Namespace, c.Name) })
	case *corev1.PersistentVolume:
		apply(deleted, o, cluster.UpdatePersistentVolume, func(pv *corev1.PersistentVolume) { cluster.DeletePersistentVolume(pv.Name) })
	case *storagev1.StorageClass:
		apply(deleted, o, cluster.UpdateStorageClass, func(sc *storagev1.StorageClass) { cluster.DeleteStorageClass(sc.Name) })
	}
}

// apply calls remove for a deleted object, update otherwise.
func apply[T any](deleted bool, obj T, update, remove func(T)) {
	if deleted {
		remove(obj)
	} else {
		update(obj)
	}
}

// feed keeps the cluster model current from the informers (no periodic
// LISTs), triggering provisioning as Observe says, and tells the model how
// to know it is complete (see complete): api reads the informers' cache.
func feed(ctx context.Context, informers ctrlcache.Informers, api client.Reader, cluster *state.Cluster, trigger func()) error {
	var handlers []cache.ResourceEventHandlerRegistration
	for _, kind := range ObservedKinds() {
		informer, err := informers.GetInformer(ctx, kind)
		if err != nil {
			return fmt.Errorf("watching %T: %w", kind, err)
		}
		observe := func(o any, deleted bool) {
			if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if obj, ok := o.(client.Object); ok {
				Observe(cluster, trigger, obj, deleted)
			}
		}
		handler, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { observe(o, false) },
			UpdateFunc: func(_, o any) { observe(o, false) },
			DeleteFunc: func(o any) { observe(o, true) },
		})
		if err != nil {
			return fmt.Errorf("handling %T events: %w", kind, err)
		}
		handlers = append(handlers, handler)
	}
	cluster.SetSyncedFunc(func() bool { return complete(ctx, handlers, api, cluster, trigger) })
	return nil
}

// missingGrace is how long a NodeClaim or Node the model holds may be
// missing from the informers' cache before the model forgets it (as
// Karpenter's state.nodeclaimgc, 15 s): longer than a NodeClaim the
// provisioner records on create takes to reach the cache, or a delete
// event its handler.
const missingGrace = 30 * time.Second

// complete reports whether the model is whole, as Karpenter's
// cluster.Synced: every handler has been handed its informer's initial
// list, and every NodeClaim and Node the cache holds has reached the model
// (a handler may lag behind its cache). On the way it forgets what the
// model holds but the cache has not for missingGrace (a delete event that
// never came), triggering a batch when a NodeClaim goes: its pods need a
// place again.
func complete(ctx context.Context, handlers []cache.ResourceEventHandlerRegistration, api client.Reader, cluster *state.Cluster, trigger func()) bool {
	for _, h := range handlers {
		if !h.HasSynced() {
			return false
		}
	}
	claims := &karpv1.NodeClaimList{}
	if err := api.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	nodes := &corev1.NodeList{}
	if err := api.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	claimNames := make([]string, 0, len(claims.Items))
	for i := range claims.Items {
		claimNames = append(claimNames, claims.Items[i].Name)
	}
	nodeNames := make([]string, 0, len(nodes.Items))
	for i := range nodes.Items {
		nodeNames = append(nodeNames, nodes.Items[i].Name)
	}
	if claims, _ := cluster.ForgetMissing(claimNames, nodeNames, missingGrace); len(claims) > 0 {
		trigger()
	}
	return cluster.HoldsAll(claimNames, nodeNames)
}

// Sync fills the cluster model from a reader, one list per observed kind:
// a one-off view of a live cluster (for `nodewright explain`) instead of
// the informers' stream. Once every list is in, the model is marked synced.
func Sync(ctx context.Context, reader client.Reader, scheme *runtime.Scheme, cluster *state.Cluster) error {
	for _, obj := range ObservedKinds() {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		gvk.Kind += "List"
		fresh, err := scheme.New(gvk)
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		list, ok := fresh.(client.ObjectList)
		if !ok {
			return fmt.Errorf("listing %s: not a list type", gvk.Kind)
		}
		if err := reader.List(ctx, list); err != nil {
			return fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			if item, ok := o.(client.Object); ok {
				Observe(cluster, func() {}, item, false)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	cluster.MarkSynced()
	return nil
}
