package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestDefaultRequests(t *testing.T) {
	cases := []struct {
		name string
		pod  corev1.PodSpec
		want corev1.ResourceList // the pod's effective requests after defaulting
	}{
		{
			name: "limits only: requests are the limits",
			pod:  corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi")}}}},
			want: rl("cpu", "2", "memory", "1Gi"),
		},
		{
			name: "a request set is kept, the missing one comes from the limit",
			pod: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Limits: rl("cpu", "2", "memory", "1Gi"), Requests: rl("cpu", "500m")}}}},
			want: rl("cpu", "500m", "memory", "1Gi"),
		},
		{
			name: "init containers too",
			pod: corev1.PodSpec{
				InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "3")}}},
				Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			},
			want: rl("cpu", "3"),
		},
		{
			name: "extended resources",
			pod:  corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "1")}}}},
			want: rl("nvidia.com/gpu", "1"),
		},
		{
			name: "pod-level limit, no container requests: the pod requests its limit",
			pod: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "8Gi")},
				Containers: []corev1.Container{{}, {}},
			},
			want: rl("cpu", "4", "memory", "8Gi"),
		},
		{
			name: "pod-level limit, containers request: the pod requests their sum",
			pod: corev1.PodSpec{
				Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "4")},
				Containers: []corev1.Container{
					{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
					{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
				},
			},
			want: rl("cpu", "1500m"),
		},
		{
			name: "nothing set: nothing requested",
			pod:  corev1.PodSpec{Containers: []corev1.Container{{}}},
			want: rl(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: *tc.pod.DeepCopy()}
			DefaultRequests(p)
			got := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
			for name, q := range tc.want {
				if g := got[name]; g.Cmp(q) != 0 {
					t.Errorf("requests[%s] = %s, want %s", name, g.String(), q.String())
				}
			}
			for name, g := range got {
				if _, ok := tc.want[name]; !ok && !g.IsZero() {
					t.Errorf("requests[%s] = %s, want none", name, g.String())
				}
			}
			if DefaultRequests(p) {
				t.Error("defaulting twice changed the pod again")
			}
		})
	}
}
