// Package diverse regenerates the "diverse pods" scheduling benchmark that
// Karpenter publishes for its own scheduler, so that Nodewright's solver can
// be measured on the same workload and the same machine:
//
//   - 400 instance types fake-it-N (N = 0..399) with N+1 CPUs, 2(N+1) GiB,
//     10(N+1) pods, kube-reserved 100m CPU and 10Mi, priced at 0.1 per CPU
//     plus 0.1 per GB (10^9 bytes) of memory; spot offerings in test-zone-1
//     and -2, on-demand in test-zone-1, -2 and -3, all at the same price;
//   - one NodePool with no requirements and no limits;
//   - pods in five equal groups: generic; zone spread (maxSkew 1,
//     DoNotSchedule, selecting a random my-label value); hostname spread
//     (the same); zone self-affinity on a random my-affininity value; and
//     hostname anti-affinity among all app=nginx pods. Every pod requests
//     CPU from {100m, 250m, 500m, 1, 1.5} and memory from {100Mi, 256Mi,
//     512Mi, 1Gi, 2Gi, 4Gi}, uniformly at random (seeded).
package diverse

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Reference figures measured with Karpenter's own scheduler on this
// workload on a 2-core machine (from the issue that set the targets).
var Reference = map[int]struct {
	Nodes      int
	PricePerH  float64
	PodsPerSec float64
	LowerBound float64
}{
	1000: {Nodes: 200, PricePerH: 349, PodsPerSec: 460, LowerBound: 217},
	5000: {Nodes: 1000, PricePerH: 1778, PodsPerSec: 250, LowerBound: 1060},
}

// Price of a type with cpus CPUs and memBytes of memory.
func Price(cpus int64, memBytes int64) float64 {
	return 0.1*float64(cpus) + 0.1*float64(memBytes)/1e9
}

// InstanceTypes returns the 400 fake-it-N types.
func InstanceTypes() []catalog.InstanceType {
	out := make([]catalog.InstanceType, 0, 400)
	for n := range 400 {
		cpus := int64(n + 1)
		mem := 2 * cpus << 30
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(10*cpus, resource.DecimalSI),
		}
		allocatable := capacity.DeepCopy()
		for name, q := range catalog.KubeReservedDefault {
			v := allocatable[name]
			v.Sub(q)
			allocatable[name] = v
		}
		name := fmt.Sprintf("fake-it-%d", n)
		price := Price(cpus, mem)
		it := catalog.InstanceType{
			Name:             name,
			Labels:           map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			OperatingSystems: []string{"linux"},
			Capacity:         capacity,
			Allocatable:      allocatable,
		}
		for _, z := range []string{"test-zone-1", "test-zone-2"} {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: price, Available: true})
		}
		for _, z := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		out = append(out, it)
	}
	return out
}

// NodePool is the benchmark's single pool: no requirements, no limits.
func NodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
	}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{}
	return np
}

// Pods returns n pods in the five groups, deterministically for a seed.
func Pods(n int, seed uint64) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	value := func() string { return []string{"a", "b", "c", "d", "e", "f", "g"}[rng.IntN(7)] }
	cpus := []string{"100m", "250m", "500m", "1", "1.5"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	var out []*corev1.Pod
	mk := func(group string, i int, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(cpus[rng.IntN(len(cpus))]),
					corev1.ResourceMemory: resource.MustParse(mems[rng.IntN(len(mems))]),
				}},
			}}},
		}
		p.UID = types.UID(p.Namespace + "/" + p.Name)
		return p
	}
	spread := func(key string, labels map[string]string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}
	}
	per := n / 5
	for i := range per {
		out = append(out, mk("generic", i, map[string]string{"my-label": value()}))
	}
	for i := range per {
		l := map[string]string{"my-label": value()}
		p := mk("zone-spread", i, l)
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{spread(corev1.LabelTopologyZone, l)}
		out = append(out, p)
	}
	for i := range per {
		l := map[string]string{"my-label": value()}
		p := mk("host-spread", i, l)
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{spread(corev1.LabelHostname, l)}
		out = append(out, p)
	}
	for i := range per {
		l := map[string]string{"my-affininity": value()}
		p := mk("zone-affinity", i, l)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: l},
		}}}}
		out = append(out, p)
	}
	for i := range n - 4*per {
		l := map[string]string{"app": "nginx"}
		p := mk("anti-affinity", i, l)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: l},
		}}}}
		out = append(out, p)
	}
	return out
}

// LowerBound is the cost floor: the pods' total requests at the linear
// price, as if nodes could be cut to fit exactly.
func LowerBound(pods []*corev1.Pod) float64 {
	var cpuMilli, mem int64
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			cpuMilli += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
	}
	return 0.1*float64(cpuMilli)/1000 + 0.1*float64(mem)/1e9
}
