package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// uniformCluster is the scale workload: nodes initialized 32-CPU
// nodes over three zones, each running podsPerNode 2-CPU pods of a
// ReplicaSet, all consolidatable, in a pool whose budget allows them all.
func uniformCluster(nodes, podsPerNode int) ([]Candidate, []sched.Node) {
	np := underutilizedPool("100%")
	cands := make([]Candidate, 0, nodes)
	cluster := make([]sched.Node, 0, nodes)
	zones := []string{"zone-a", "zone-b", "zone-c"}
	yes := true
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		var pods []*corev1.Pod
		for j := range podsPerNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-pod-%d", name, j), UID: types.UID(fmt.Sprintf("%d-%d", i, j)),
				Labels:          map[string]string{"app": "load"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "load", Controller: &yes}}}}
			p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}
			pods = append(pods, p)
		}
		c := candidate(name, np, time.Hour, pods...)
		c.NodeClaim.Labels = map[string]string{karpv1.LabelNodePool: np.Name, corev1.LabelInstanceTypeStable: "m.8xlarge",
			corev1.LabelTopologyZone: zones[i%3], karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand}
		cands = append(cands, c)
		cluster = append(cluster, sched.Node{Name: name, NodePool: np.Name, Initialized: true, Pods: pods,
			Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zones[i%3]},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("120Gi"),
				corev1.ResourcePods: resource.MustParse("110")}})
	}
	return cands, cluster
}

// One pass plans the whole cluster's consolidation: 100 nodes of 32 CPUs
// each running two 2-CPU pods need only 13 (16 pods each), so 87 go.
func TestUnderutilizedPlansTheWholeCluster(t *testing.T) {
	cands, cluster := uniformCluster(100, 2)
	d, err := Underutilized(cands, cluster, nil, sched.Input{}, DefaultPolicy, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.Command.Candidates); got != 87 {
		t.Fatalf("consolidation takes %d nodes, want 87 (200 pods fit on 13)", got)
	}
	if len(d.Command.Replacements) != 0 {
		t.Errorf("deletion came with %d replacements", len(d.Command.Replacements))
	}
}

// BenchmarkConsolidation plans the consolidation of the workload:
// Karpenter takes ≈19 s per pass at 1,000 nodes and yields at most ~100
// nodes per command; the target is the whole cluster in under 2 s.
func BenchmarkConsolidation(b *testing.B) {
	for _, size := range []struct{ nodes, pods int }{{100, 2}, {500, 2}, {1000, 2}, {5000, 10}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.nodes*size.pods), func(b *testing.B) {
			cands, cluster := uniformCluster(size.nodes, size.pods)
			var taken int
			for b.Loop() {
				d, err := Underutilized(cands, cluster, nil, sched.Input{}, DefaultPolicy, epoch)
				if err != nil {
					b.Fatal(err)
				}
				taken = len(d.Command.Candidates)
			}
			b.ReportMetric(float64(taken), "nodes-removed")
		})
	}
}

// BenchmarkConsolidationMixed plans the consolidation of a scaled-down
// cluster of mixed sizes and prices (c-4 to c-192, spot and on-demand, 4
// zones, 2 Deployment pods and 1 zone-spread pod per node), where every
// deletion order differs and is tried.
func BenchmarkConsolidationMixed(b *testing.B) {
	sizes := []string{"c-4x", "c-8x", "c-16x", "c-32x", "c-96x", "c-128x", "c-192x"}
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			shape := make([]scaledNode, nodes)
			for i := range shape {
				ct := karpv1.CapacityTypeSpot
				if i%5 == 0 {
					ct = karpv1.CapacityTypeOnDemand
				}
				shape[i] = scaledNode{instanceType: sizes[i%len(sizes)], zone: string(rune('a' + i%4)), capacityType: ct, load: 2, spread: 1}
			}
			f := scaledDown(b, shape)
			cands, cluster := f.view()
			pools := []sched.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}
			var taken int
			for b.Loop() {
				d, err := Underutilized(cands, cluster, pools, sched.Input{}, DefaultPolicy, epoch)
				if err != nil {
					b.Fatal(err)
				}
				taken = len(d.Command.Candidates)
			}
			b.ReportMetric(float64(taken), "nodes-removed")
		})
	}
}
