package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/state"
)

// feed keeps the cluster model current from the manager's informers, and
// calls onPending for pods that may need capacity and onClaimGone when a
// NodeClaim disappears (its pods may need capacity again).
func feed(ctx context.Context, informers ctrlcache.Cache, cluster *state.Cluster, onPending, onClaimGone func()) error {
	type binding struct {
		obj    client.Object
		update func(any)
		remove func(any)
	}
	bindings := []binding{
		{&corev1.Pod{}, func(o any) {
			p := o.(*corev1.Pod)
			cluster.UpdatePod(p)
			if cluster.Provisionable(p) {
				onPending()
			}
		}, func(o any) { p := o.(*corev1.Pod); cluster.DeletePod(p.Namespace, p.Name) }},
		{&corev1.Node{}, func(o any) { cluster.UpdateNode(o.(*corev1.Node)) }, func(o any) { cluster.DeleteNode(o.(*corev1.Node).Name) }},
		{&karpv1.NodeClaim{}, func(o any) { cluster.UpdateNodeClaim(o.(*karpv1.NodeClaim)) }, func(o any) {
			cluster.DeleteNodeClaim(o.(*karpv1.NodeClaim).Name)
			onClaimGone()
		}},
		{&karpv1.NodePool{}, func(o any) { cluster.UpdateNodePool(o.(*karpv1.NodePool)); onPending() }, func(o any) { cluster.DeleteNodePool(o.(*karpv1.NodePool).Name) }},
		{&appsv1.DaemonSet{}, func(o any) { cluster.UpdateDaemonSet(o.(*appsv1.DaemonSet)) }, func(o any) {
			ds := o.(*appsv1.DaemonSet)
			cluster.DeleteDaemonSet(ds.Namespace, ds.Name)
		}},
		{&corev1.Namespace{}, func(o any) { cluster.UpdateNamespace(o.(*corev1.Namespace)) }, func(o any) { cluster.DeleteNamespace(o.(*corev1.Namespace).Name) }},
		{&corev1.PersistentVolumeClaim{}, func(o any) { cluster.UpdatePersistentVolumeClaim(o.(*corev1.PersistentVolumeClaim)) }, func(o any) {
			c := o.(*corev1.PersistentVolumeClaim)
			cluster.DeletePersistentVolumeClaim(c.Namespace, c.Name)
		}},
		{&corev1.PersistentVolume{}, func(o any) { cluster.UpdatePersistentVolume(o.(*corev1.PersistentVolume)) }, func(o any) {
			cluster.DeletePersistentVolume(o.(*corev1.PersistentVolume).Name)
		}},
		{&storagev1.StorageClass{}, func(o any) { cluster.UpdateStorageClass(o.(*storagev1.StorageClass)) }, func(o any) {
			cluster.DeleteStorageClass(o.(*storagev1.StorageClass).Name)
		}},
	}
	for _, b := range bindings {
		informer, err := informers.GetInformer(ctx, b.obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", b.obj, err)
		}
		update, remove := b.update, b.remove
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    update,
			UpdateFunc: func(_, o any) { update(o) },
			DeleteFunc: func(o any) {
				if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = tomb.Obj
				}
				remove(o)
			},
		}); err != nil {
			return fmt.Errorf("handling %T events: %w", b.obj, err)
		}
	}
	return nil
}
