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
			return
		}
		cluster.UpdatePod(o)
		if cluster.Provisionable(o) {
			trigger()
		}
	case *corev1.Node:
		if deleted {
			cluster.DeleteNode(o.Name)
			return
		}
		cluster.UpdateNode(o)
	case *karpv1.NodeClaim:
		if deleted {
			cluster.DeleteNodeClaim(o.Name)
			trigger()
			return
		}
		cluster.UpdateNodeClaim(o)
	case *karpv1.NodePool:
		if deleted {
			cluster.DeleteNodePool(o.Name)
			return
		}
		cluster.UpdateNodePool(o)
		trigger()
	case *appsv1.DaemonSet:
		if deleted {
			cluster.DeleteDaemonSet(o.Namespace, o.Name)
			return
		}
		cluster.UpdateDaemonSet(o)
	case *corev1.Namespace:
		if deleted {
			cluster.DeleteNamespace(o.Name)
			return
		}
		cluster.UpdateNamespace(o)
	case *corev1.PersistentVolumeClaim:
		if deleted {
			cluster.DeletePersistentVolumeClaim(o.Namespace, o.Name)
			return
		}
		cluster.UpdatePersistentVolumeClaim(o)
	case *corev1.PersistentVolume:
		if deleted {
			cluster.DeletePersistentVolume(o.Name)
			return
		}
		cluster.UpdatePersistentVolume(o)
	case *storagev1.StorageClass:
		if deleted {
			cluster.DeleteStorageClass(o.Name)
			return
		}
		cluster.UpdateStorageClass(o)
	}
}

// feed keeps the cluster model current from the manager's informers (no
// periodic LISTs), triggering provisioning as Observe says.
func feed(ctx context.Context, informers ctrlcache.Cache, cluster *state.Cluster, trigger func()) error {
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
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { observe(o, false) },
			UpdateFunc: func(_, o any) { observe(o, false) },
			DeleteFunc: func(o any) { observe(o, true) },
		}); err != nil {
			return fmt.Errorf("handling %T events: %w", kind, err)
		}
	}
	return nil
}
