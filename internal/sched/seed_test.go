package sched

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// The seed documents' NodePools on the AWS-like catalog: golden behaviour a
// user of those manifests expects.
func seedInput(t *testing.T) (pools []NodePool, byName map[string]*catalog.InstanceType) {
	t.Helper()
	types, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	its := make([]*catalog.InstanceType, len(types))
	byName = map[string]*catalog.InstanceType{}
	for i := range types {
		its[i] = &types[i]
		byName[types[i].Name] = &types[i]
	}
	for _, f := range []string{"nodepool-default.yaml", "nodepool-stable.yaml", "nodepool-gpu.yaml"} {
		raw, err := os.ReadFile("../../testdata/seed/" + f)
		if err != nil {
			t.Fatal(err)
		}
		np := &karpv1.NodePool{}
		if err := yaml.UnmarshalStrict(raw, np); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pools = append(pools, NodePool{NodePool: np, InstanceTypes: its})
	}
	return pools, byName
}

func webAPIPods(t *testing.T) []*corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/seed/deployment-web-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(raw, d); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range int(*d.Spec.Replicas) {
		p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace, p.UID = "web-api-"+string(rune('a'+i)), "default", types.UID("web-api-"+string(rune('a'+i)))
		pods = append(pods, p)
	}
	return pods
}

func TestSeedNodePools(t *testing.T) {
	pools, byName := seedInput(t)
	gpuPod := pod("train", "4", "16Gi", withRequests("nvidia.com/gpu", "1"), withToleration("nvidia.com/gpu", corev1.TaintEffectNoSchedule))
	plainPod := pod("plain", "2", "4Gi")
	generalPod := pod("general", "2", "4Gi", withNodeSelector("node-type", "general"))
	pods := append(webAPIPods(t), gpuPod, plainPod, generalPod)
	pods[0].CreationTimestamp = metav1.Now()

	plan := Solve(Input{Pods: pods, NodePools: pools})
	for _, u := range plan.Unschedulable {
		t.Errorf("%s is unschedulable: %s", u.Pod.Name, u.Reason)
	}
	type where struct {
		pool, capacityType, arch, category string
	}
	placed := map[string]where{}
	for _, nc := range plan.NodeClaims {
		t.Logf("%s: %s %s %s $%.4f/h, %d pods, options %d", nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price, len(nc.Pods), len(nc.InstanceTypeOptions))
		it := byName[nc.InstanceType]
		for _, p := range nc.Pods {
			placed[p.Name] = where{nc.NodePool, nc.CapacityType, it.Labels["kubernetes.io/arch"], it.Labels["karpenter.k8s.aws/instance-category"]}
		}
	}
	for _, p := range pods {
		w := placed[p.Name]
		switch {
		case strings.HasPrefix(p.Name, "web-api"):
			// nodeSelector node-type: stable -> the stable pool: on-demand, amd64, m or r.
			if w.pool != "stable" || w.capacityType != "on-demand" || w.arch != "amd64" || (w.category != "m" && w.category != "r") {
				t.Errorf("%s on %+v, want the stable pool's on-demand amd64 m/r types", p.Name, w)
			}
		case p.Name == "train":
			if w.pool != "gpu" || (w.category != "g" && w.category != "p") {
				t.Errorf("the GPU pod is on %+v, want the gpu pool's g/p types", w)
			}
		case p.Name == "general":
			if w.pool != "default" || w.capacityType != "spot" {
				t.Errorf("the node-type=general pod is on %+v, want the default pool on spot", w)
			}
		}
		if p.Name != "train" && w.pool == "gpu" {
			t.Errorf("%s requests no GPU and tolerates no GPU taint, yet is on the gpu pool", p.Name)
		}
	}
}
