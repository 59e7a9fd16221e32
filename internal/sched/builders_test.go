package sched

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// Small builders for solver tests.

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

type podOpt func(*corev1.Pod)

func pod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "memory", mem)},
		}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withRequests(pairs ...string) podOpt {
	return func(p *corev1.Pod) {
		for k, v := range rl(pairs...) {
			p.Spec.Containers[0].Resources.Requests[k] = v
		}
	}
}

func withNodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func withToleration(key string, effect corev1.TaintEffect) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
}

func affinity(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return p.Spec.Affinity.NodeAffinity
}

// withRequiredTerms adds required node-affinity terms (ORed).
func withRequiredTerms(terms ...[]corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		na := affinity(p)
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		for _, t := range terms {
			na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
	}
}

func withPreferred(weight int32, exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		na := affinity(p)
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

type poolOpt func(*karpv1.NodePool)

func nodePool(name string, its []*catalog.InstanceType, opts ...poolOpt) NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	for _, o := range opts {
		o(np)
	}
	return NodePool{NodePool: np, InstanceTypes: its}
}

func withRequirement(key string, op corev1.NodeSelectorOperator, values ...string) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

func withTaint(key, value string, effect corev1.TaintEffect) poolOpt {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withLabel(k, v string) poolOpt {
	return func(np *karpv1.NodePool) {
		if np.Spec.Template.ObjectMeta.Labels == nil {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{}
		}
		np.Spec.Template.ObjectMeta.Labels[k] = v
	}
}

func withWeight(w int32) poolOpt { return func(np *karpv1.NodePool) { np.Spec.Weight = &w } }

func withLimits(pairs ...string) poolOpt {
	return func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits(rl(pairs...)) }
}

// instanceType is a kwok-style type with an on-demand offering per zone at
// price and a spot one at 70% of it.
func instanceType(name string, cpu, memGi int, price float64, extra ...string) *catalog.InstanceType {
	capacity := rl(append([]string{"cpu", fmt.Sprint(cpu), "memory", fmt.Sprintf("%dGi", memGi), "pods", "110"}, extra...)...)
	it := &catalog.InstanceType{
		Name:             name,
		Labels:           map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		OperatingSystems: []string{"linux"},
		Capacity:         capacity,
		Allocatable:      capacity.DeepCopy(),
	}
	for _, z := range []string{"zone-a", "zone-b"} {
		it.Offerings = append(it.Offerings,
			catalog.Offering{Zone: z, CapacityType: "on-demand", Price: price, Available: true},
			catalog.Offering{Zone: z, CapacityType: "spot", Price: price * 0.7, Available: true})
	}
	return it
}

// smallCatalog: three general sizes and a GPU type.
func smallCatalog() []*catalog.InstanceType {
	return []*catalog.InstanceType{
		instanceType("small", 2, 4, 0.10),
		instanceType("medium", 4, 8, 0.20),
		instanceType("large", 16, 32, 0.80),
		instanceType("gpu", 8, 32, 1.50, "nvidia.com/gpu", "1"),
	}
}
