package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

// workload is what one run applies: the NodePool's disruption settings and
// the two Deployments' sizes.
type workload struct {
	// pods is Deployment A's replicas; Deployment B (zone-spread) has pods/5.
	pods int
	// consolidateAfter and budget go into the NodePool's disruption block.
	consolidateAfter string
	budget           string
	// scaleDownPercent is what both Deployments are scaled to in phase 2.
	scaleDownPercent int
	// componentQPS, when set, is kube-controller-manager's and
	// kube-scheduler's client rate for this run (0: their defaults).
	componentQPS int
}

const (
	namespace   = "default"
	deployA     = "bench-a"
	deployB     = "bench-b"
	appLabel    = "app"
	benchLabel  = "nodewright-bench"
	pauseImage  = "registry.k8s.io/pause:3.10"
	nodePoolAll = "default"
)

func (w workload) spreadPods() int { return w.pods / 5 }
func (w workload) totalPods() int  { return w.pods + w.spreadPods() }

// scaled returns n scaled to the scale-down percentage, rounded up, so a
// Deployment that had pods keeps at least one.
func (w workload) scaled(n int) int { return (n*w.scaleDownPercent + 99) / 100 }

func (w workload) scaledTotal() int { return w.scaled(w.pods) + w.scaled(w.spreadPods()) }

// label is the size as the table shows it, "500+100".
func (w workload) label() string {
	if w.componentQPS > 0 {
		return fmt.Sprintf("%d+%d @%d", w.pods, w.spreadPods(), w.componentQPS)
	}
	return fmt.Sprintf("%d+%d", w.pods, w.spreadPods())
}

// componentArgs are the client-rate flags of kube-controller-manager and
// kube-scheduler for the run (none: their defaults).
func (w workload) componentArgs() []string {
	if w.componentQPS == 0 {
		return nil
	}
	return []string{fmt.Sprintf("--kube-api-qps=%d", w.componentQPS), fmt.Sprintf("--kube-api-burst=%d", w.componentQPS*3/2)}
}

func nodeClass() *kwokv1alpha1.KWOKNodeClass {
	return &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
}

// nodePool is the benchmark's only NodePool: linux/amd64 types (the kwok
// catalog also holds arm64 and windows ones; the pods could run on neither
// image-wise, so the pool excludes them, as Karpenter's reference setup
// does), spot or on-demand, consolidating empty and underutilized nodes, no
// limits.
func (w workload) nodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: nodePoolAll}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Linux)}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}},
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(w.consolidateAfter)
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: w.budget}}
	return np
}

// deployment is one of the two workloads: replicas pods of 1 CPU / 2 GiB,
// spread over zones (maxSkew 1, DoNotSchedule) when spread is set.
func deployment(name string, replicas int, spread bool) *appsv1.Deployment {
	labels := map[string]string{appLabel: name, benchLabel: "true"}
	r := int32(replicas)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &r,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{appLabel: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "app",
						Image: pauseImage,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("1"),
							corev1.ResourceMemory: resource.MustParse("2Gi"),
						}},
					}},
				},
			},
		},
	}
	if spread {
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{appLabel: name}},
		}}
	}
	return d
}

// applyClassAndPool creates the KWOKNodeClass and the NodePool.
func (w workload) applyClassAndPool(ctx context.Context, kube client.Client) error {
	for _, obj := range []client.Object{nodeClass(), w.nodePool()} {
		if err := kube.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// applyDeployments creates both Deployments.
func (w workload) applyDeployments(ctx context.Context, kube client.Client) error {
	for _, d := range []*appsv1.Deployment{deployment(deployA, w.pods, false), deployment(deployB, w.spreadPods(), true)} {
		if err := kube.Create(ctx, d); err != nil {
			return fmt.Errorf("creating deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// scaleDown patches both Deployments to the scale-down percentage.
func (w workload) scaleDown(ctx context.Context, kube client.Client) error {
	for name, replicas := range map[string]int{deployA: w.scaled(w.pods), deployB: w.scaled(w.spreadPods())} {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		if err := kube.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("scaling deployment %s to %d: %w", name, replicas, err)
		}
	}
	return nil
}
