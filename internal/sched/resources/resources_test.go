package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func container(name, cpu, mem string) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("proxy", "500m", "64Mi")
	sidecar.RestartPolicy = &always
	cases := []struct {
		name    string
		spec    corev1.PodSpec
		wantCPU int64 // millicores
		wantMem int64 // bytes
	}{
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{container("a", "1", "1Gi"), container("b", "500m", "512Mi")}}, 1500, 1536 << 20},
		{"an init container larger than the containers", corev1.PodSpec{
			InitContainers: []corev1.Container{container("migrate", "2", "256Mi")},
			Containers:     []corev1.Container{container("a", "1", "1Gi"), container("b", "500m", "512Mi")},
		}, 2000, 1536 << 20},
		{"a sidecar runs beside the later init containers and the app", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container("migrate", "2", "128Mi")},
			Containers:     []corev1.Container{container("app", "1", "1Gi")},
		}, 2500, (1024 + 64) << 20},
		{"pod overhead is added", corev1.PodSpec{
			Containers: []corev1.Container{container("a", "1", "1Gi")},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")},
		}, 1250, (1024 + 120) << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := NewIndex()
			v := ix.PodRequests(&corev1.Pod{Spec: c.spec})
			if v[CPU] != c.wantCPU || v[Memory] != c.wantMem || v[Pods] != 1 {
				t.Errorf("requests cpu=%dm memory=%d pods=%d, want %dm, %d, 1", v[CPU], v[Memory], v[Pods], c.wantCPU, c.wantMem)
			}
		})
	}
}

func TestFitsAcrossExtendedResources(t *testing.T) {
	ix := NewIndex()
	node := ix.Vector(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")})
	gpuPod := ix.Vector(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")})
	if gpuPod.Fits(node) {
		t.Error("a GPU pod fits a node without GPUs")
	}
	if ex := gpuPod.Exceeding(node); len(ex) != 1 || ix.Name(ex[0]) != "nvidia.com/gpu" {
		t.Errorf("exceeding slots %v, want nvidia.com/gpu", ex)
	}
	gpuNode := node.Plus(ix.Vector(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}))
	if !gpuPod.Fits(gpuNode) {
		t.Error("a GPU pod does not fit a GPU node")
	}
	if left := gpuNode.Minus(gpuPod); left[CPU] != 3000 || left[ix.slots["nvidia.com/gpu"]] != 3 {
		t.Errorf("left after the pod: %v", ix.ResourceList(left))
	}
	rl := ix.ResourceList(gpuNode)
	if q := rl[corev1.ResourceMemory]; q.String() != "16Gi" {
		t.Errorf("memory renders as %s, want 16Gi", q.String())
	}
	if q := rl[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("cpu renders as %s, want 4", q.String())
	}
}
