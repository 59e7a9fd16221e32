package simulator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/internal/manifest"
)

// Apply creates every object of set now, as `kubectl apply` would:
// NodeClasses and NodePools first, then nodes, storage and namespaces, then
// workloads and pods. NodeClaims in manifests are not applied (Nodewright
// makes its own).
func (e *Engine) Apply(ctx context.Context, set *manifest.Set) error {
	nodes := make([]*corev1.Node, len(set.Nodes))
	for i, n := range set.Nodes {
		nodes[i] = readyNode(n.DeepCopy())
	}
	var objs []client.Object
	objs = appendCopies(objs, set.KWOKNodeClasses)
	objs = appendCopies(objs, set.EC2NodeClasses)
	objs = appendCopies(objs, set.NodePools)
	objs = appendCopies(objs, set.Namespaces)
	objs = appendCopies(objs, set.StorageClasses)
	objs = appendCopies(objs, set.PersistentVolumes)
	objs = appendCopies(objs, set.AllPersistentVolumeClaims())
	objs = appendCopies(objs, nodes)
	objs = appendCopies(objs, set.DaemonSets)
	objs = appendCopies(objs, set.Deployments)
	objs = appendCopies(objs, set.ReplicaSets)
	objs = appendCopies(objs, set.StatefulSets)
	objs = appendCopies(objs, set.PodDisruptionBudgets)
	objs = appendCopies(objs, set.Jobs)
	objs = appendCopies(objs, set.Pods)
	for _, obj := range objs {
		if err := e.create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// appendCopies appends a copy of each item.
func appendCopies[T client.Object](objs []client.Object, items []T) []client.Object {
	for _, o := range items {
		objs = append(objs, o.DeepCopyObject().(client.Object))
	}
	return objs
}

// create creates obj (in namespace default when it is namespaced and has
// none), or updates it when it exists, as kubectl apply would.
func (e *Engine) create(ctx context.Context, obj client.Object) error {
	namespaced, err := e.store.IsObjectNamespaced(obj)
	if err != nil {
		return fmt.Errorf("%T %s: %w", obj, obj.GetName(), err)
	}
	if namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	obj.SetResourceVersion("")
	err = e.store.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		existing := obj.DeepCopyObject().(client.Object)
		if err := e.store.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
			return fmt.Errorf("updating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
		obj.SetResourceVersion(existing.GetResourceVersion())
		obj.SetUID(existing.GetUID())
		obj.SetCreationTimestamp(existing.GetCreationTimestamp())
		err = e.store.Update(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("applying %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// readyNode gives a node from a manifest the Ready condition it would have.
func readyNode(n *corev1.Node) *corev1.Node {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return n
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})
	if n.Status.Allocatable == nil {
		n.Status.Allocatable = n.Status.Capacity
	}
	return n
}
