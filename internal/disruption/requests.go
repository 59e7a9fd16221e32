package disruption

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// RequestMemo remembers pods' effective requests, keyed by the pod object:
// the cluster model hands out the same object until the pod changes, so a
// memo kept across rounds computes each pod once. Sweep forgets the pods
// not asked about since the last sweep.
type RequestMemo struct {
	now, last map[*corev1.Pod]corev1.ResourceList
}

// NewRequestMemo returns an empty memo.
func NewRequestMemo() *RequestMemo {
	return &RequestMemo{now: map[*corev1.Pod]corev1.ResourceList{}, last: map[*corev1.Pod]corev1.ResourceList{}}
}

// Of is the pod's requests (component-helpers' PodRequests), from the memo
// when known.
func (m *RequestMemo) Of(p *corev1.Pod) corev1.ResourceList {
	if r, ok := m.now[p]; ok {
		return r
	}
	r, ok := m.last[p]
	if !ok {
		r = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	}
	m.now[p] = r
	return r
}

// Sweep starts a new generation: what was not asked for since the last
// sweep is forgotten.
func (m *RequestMemo) Sweep() {
	m.last, m.now = m.now, make(map[*corev1.Pod]corev1.ResourceList, len(m.now))
}
