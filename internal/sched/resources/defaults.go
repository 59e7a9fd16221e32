package resources

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// DefaultRequests applies kube-apiserver's defaulting of a pod's resource
// requests in place, as it happens when the pod is created:
//
//   - a container (init containers included) that sets a limit for a
//     resource but no request for it requests its limit;
//   - with pod-level resources, a resource limited at the pod level but
//     not requested there requests what the containers request of it when
//     any container does, and the pod-level limit otherwise.
//
// Objects that never go through pod creation need it before they are
// solved for: manifests read offline, pods the simulator creates, and pods
// built from a DaemonSet's template (a template is not defaulted).
// It reports whether it changed anything.
func DefaultRequests(p *corev1.Pod) bool {
	changed := false
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			changed = limitsIntoRequests(&cs[i].Resources) || changed
		}
	}
	if r := p.Spec.Resources; r != nil && len(r.Limits) > 0 {
		var containers corev1.ResourceList
		for name, limit := range r.Limits {
			if _, ok := r.Requests[name]; ok {
				continue
			}
			if containers == nil {
				containers = resourcehelper.AggregateContainerRequests(p, resourcehelper.PodResourcesOptions{})
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			if q, ok := containers[name]; ok && anyContainerRequests(p, name) {
				r.Requests[name] = q.DeepCopy()
			} else {
				r.Requests[name] = limit.DeepCopy()
			}
			changed = true
		}
	}
	return changed
}

// limitsIntoRequests copies each limit without a request into the requests.
func limitsIntoRequests(r *corev1.ResourceRequirements) bool {
	changed := false
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = limit.DeepCopy()
		changed = true
	}
	return changed
}

func anyContainerRequests(p *corev1.Pod, name corev1.ResourceName) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Requests[name]; ok {
				return true
			}
		}
	}
	return false
}
