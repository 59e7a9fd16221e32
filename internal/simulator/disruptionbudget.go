package simulator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionAllowed answers an eviction as kube-apiserver does with the
// disruption controller keeping budgets current: refused with 429 when a
// PodDisruptionBudget selecting a healthy pod allows no more disruption.
func (e *Engine) evictionAllowed(ctx context.Context, obj client.Object) error {
	// Read only: the stored pod and budgets themselves, not copies (a
	// blocked drain asks again every second).
	pod := e.store.storedPod(client.ObjectKeyFromObject(obj))
	if pod == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), obj.GetName())
	}
	if !healthy(pod) {
		return nil // an unhealthy pod does not count against a budget
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := e.store.List(ctx, &pdbs, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		// policy/v1: no selector selects nothing, an empty one everything.
		if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		up, desired, err := e.pdbHealth(ctx, pdb, selector)
		if err != nil {
			return err
		}
		if up-1 < desired {
			return apierrors.NewTooManyRequests(fmt.Sprintf("Cannot evict pod as it would violate the pod's disruption budget %s (%d healthy, %d needed).", pdb.Name, up, desired), 10)
		}
	}
	return nil
}

// pdbHealth counts a budget's healthy pods (up) and how many it keeps up
// (desired), as the disruption controller keeps its status.
func (e *Engine) pdbHealth(ctx context.Context, pdb *policyv1.PodDisruptionBudget, selector labels.Selector) (up, desired int, err error) {
	var pods corev1.PodList
	// Read only: the stored pods themselves, not copies.
	if err := e.store.List(ctx, &pods, client.InNamespace(pdb.Namespace), client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	expected := 0
	scales := map[types.UID]int{}
	for j := range pods.Items {
		p := &pods.Items[j]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if healthy(p) {
			up++
		}
		// As the disruption controller: the expected count is the
		// owners' scale (a pod just evicted is still expected), else
		// the pods themselves.
		if ref := metav1.GetControllerOf(p); ref != nil {
			if _, seen := scales[ref.UID]; !seen {
				scales[ref.UID] = e.scaleOf(ctx, p.Namespace, ref)
			}
			if scales[ref.UID] >= 0 {
				continue
			}
		}
		expected++
	}
	for _, n := range scales {
		expected += max(n, 0)
	}
	desired, err = desiredHealthy(pdb, expected)
	if err != nil {
		return 0, 0, apierrors.NewBadRequest(fmt.Sprintf("poddisruptionbudget %s/%s: %v", pdb.Namespace, pdb.Name, err))
	}
	return up, desired, nil
}

// scaleOf is the replicas of a pod's controller, or -1 when it has none.
func (e *Engine) scaleOf(ctx context.Context, namespace string, ref *metav1.OwnerReference) int {
	newObj, ok := kinds[ref.Kind]
	if !ok {
		return -1
	}
	obj := newObj()
	if err := e.store.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return -1
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return int(replicasOf(o.Spec.Replicas))
	case *appsv1.ReplicaSet:
		return int(replicasOf(o.Spec.Replicas))
	case *appsv1.StatefulSet:
		return int(replicasOf(o.Spec.Replicas))
	}
	return -1
}

// desiredHealthy is how many of expected pods a budget keeps up.
func desiredHealthy(pdb *policyv1.PodDisruptionBudget, expected int) (int, error) {
	switch {
	case pdb.Spec.MinAvailable != nil:
		return intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
	case pdb.Spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
		return expected - n, err
	}
	return 0, nil
}

// healthy: running, ready and not going away.
func healthy(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
