package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func (k *Kubelet) reconcilePod(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.kube.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			k.finished.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	node := &corev1.Node{}
	if err := k.kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if !k.plays(node) {
		return reconcile.Result{}, nil // a real kubelet's pod
	}
	if pod.DeletionTimestamp != nil {
		return reconcile.Result{}, k.finish(ctx, pod)
	}
	status := RunningStatus(pod, k.clock.Now())
	if status == nil {
		return reconcile.Result{}, nil
	}
	data, err := runningPatch(pod.UID, status)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("encoding the running status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := k.kube.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("running pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return reconcile.Result{}, nil
}

// finish removes a pod being deleted once its containers stopped (at once
// here), as a kubelet does: grace 0, on condition that it is still the pod
// the cache showed, so that a pod recreated under the same name (a
// StatefulSet's) is not deleted in its place.
func (k *Kubelet) finish(ctx context.Context, pod *corev1.Pod) error {
	key := client.ObjectKeyFromObject(pod)
	if k.finished.has(key, pod.UID) {
		return nil // removed; the cache has not seen it go yet
	}
	err := k.kube.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or replaced by a pod of its own
	}
	if err != nil {
		return fmt.Errorf("finishing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	k.finished.add(key, pod.UID)
	return nil
}

// finished remembers, by key, the UID of each pod the kubelet removed
// until a reconcile finds it gone from the cache. Between the two, the
// cache may still show the pod being deleted (the API server reports a
// graceful deletion cut short as an update before the deletion), and
// deleting it again would only cost a request answered 404.
type finished struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func (f *finished) has(key types.NamespacedName, uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	got, ok := f.uids[key]
	return ok && got == uid
}

func (f *finished) add(key types.NamespacedName, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uids[key] = uid
}

func (f *finished) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, key)
}

// runningPatch is the strategic merge patch that posts status. It carries
// only what the kubelet owns (phase, start time, its conditions, which
// merge by type with others', and container statuses) and no resource
// version: the kubelet owns pod status, so a change to the pod since the
// cache saw it (labels, a condition of kube-scheduler's) is no conflict.
// The UID in metadata is immutable: the API server rejects the patch if the
// pod was recreated under the same name meanwhile.
func runningPatch(uid types.UID, status *corev1.PodStatus) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status": map[string]any{
			"phase": status.Phase, "startTime": status.StartTime, "conditions": status.Conditions, "containerStatuses": status.ContainerStatuses,
		},
	})
}

// RunningStatus returns the status a kubelet posts for a pod it has just
// started (conditions merge by type with the pod's others), or nil when
// there is nothing to do.
func RunningStatus(pod *corev1.Pod, now time.Time) *corev1.PodStatus {
	if pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return nil
	}
	stamp := metav1.NewTime(now)
	out := &corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &stamp}
	kinds := []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}
	if !scheduled(pod) {
		kinds = append([]corev1.PodConditionType{corev1.PodScheduled}, kinds...) // bound without kube-scheduler
	}
	for _, t := range kinds {
		out.Conditions = append(out.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: stamp})
	}
	for _, c := range pod.Spec.Containers {
		out.ContainerStatuses = append(out.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: stamp}},
		})
	}
	return out
}

// scheduled: kube-scheduler's PodScheduled condition is True (it owns it).
func scheduled(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
