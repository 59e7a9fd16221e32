package manifest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/sched/resources"
)

// PendingPods returns the pods waiting for a node: standalone pods with no
// spec.nodeName, and one pod per replica of every Deployment, ReplicaSet,
// StatefulSet and (per parallelism) Job, in the order they were read.
func (s *Set) PendingPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.Pods {
		if p.Spec.NodeName == "" {
			out = append(out, withDefaults(p.DeepCopy()))
		}
	}
	for _, d := range s.Deployments {
		out = append(out, replicas(d.ObjectMeta, d.Spec.Template, count(d.Spec.Replicas, 1), "Deployment")...)
	}
	for _, rs := range s.ReplicaSets {
		out = append(out, replicas(rs.ObjectMeta, rs.Spec.Template, count(rs.Spec.Replicas, 1), "ReplicaSet")...)
	}
	for _, st := range s.StatefulSets {
		pods := replicas(st.ObjectMeta, st.Spec.Template, count(st.Spec.Replicas, 1), "StatefulSet")
		for i, p := range pods {
			for _, t := range st.Spec.VolumeClaimTemplates {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("%s-%s-%d", t.Name, st.Name, i)}}})
			}
		}
		out = append(out, pods...)
	}
	for _, j := range s.Jobs {
		n := count(j.Spec.Parallelism, 1)
		if j.Spec.Completions != nil && *j.Spec.Completions < n {
			n = *j.Spec.Completions
		}
		out = append(out, replicas(j.ObjectMeta, j.Spec.Template, n, "Job")...)
	}
	return out
}

// AllPersistentVolumeClaims returns the claims read, plus those a
// StatefulSet's volumeClaimTemplates would create for its replicas
// (<template>-<statefulset>-<ordinal>) that were not read.
func (s *Set) AllPersistentVolumeClaims() []*corev1.PersistentVolumeClaim {
	out := append([]*corev1.PersistentVolumeClaim{}, s.PersistentVolumeClaims...)
	have := map[string]bool{}
	for _, c := range out {
		have[namespaceOf(c.Namespace)+"/"+c.Name] = true
	}
	for _, st := range s.StatefulSets {
		for i := range count(st.Spec.Replicas, 1) {
			for _, t := range st.Spec.VolumeClaimTemplates {
				c := t.DeepCopy()
				c.Name, c.Namespace = fmt.Sprintf("%s-%s-%d", t.Name, st.Name, i), namespaceOf(st.Namespace)
				if !have[c.Namespace+"/"+c.Name] {
					out = append(out, c)
				}
			}
		}
	}
	for _, c := range out {
		c.Namespace = namespaceOf(c.Namespace)
	}
	return out
}

func namespaceOf(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// BoundPods returns the standalone pods already bound to a node, by node name.
func (s *Set) BoundPods() map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], withDefaults(p.DeepCopy()))
		}
	}
	return out
}

func count(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// replicas builds n pods from a workload's template, named <workload>-<i>.
func replicas(owner metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int32, kind string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name = fmt.Sprintf("%s-%d", owner.Name, i)
		p.Namespace = owner.Namespace
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: owner.Name, Controller: ptr(true)}}
		out = append(out, withDefaults(p))
	}
	return out
}

// withDefaults fills what the API server would: the namespace, a UID and
// requests from limits (resources.DefaultRequests).
func withDefaults(p *corev1.Pod) *corev1.Pod {
	resources.DefaultRequests(p)
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	if p.UID == "" {
		p.UID = types.UID(p.Namespace + "/" + p.Name)
	}
	return p
}

func ptr[T any](v T) *T { return &v }
