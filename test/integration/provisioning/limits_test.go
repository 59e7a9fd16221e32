//go:build integration

package provisioning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// A NodePool with limits.cpu 4 and 2-CPU nodes buys two nodes for four
// pods that each need a node of their own; the other two pods stay
// pending with an event saying the limit stopped them.
func TestNodePoolLimitStopsProvisioning(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, testCatalog(t))
	ensureNodeClass(ctx, t, kube)
	pool := zonalPool("limited", "c-2x-amd64-linux")
	pool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		pod := zoneAPod(fmt.Sprintf("limited-%d", i), "limited")
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1200m")
		if err := kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	running, limited := 0, map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
			return false, err
		}
		running = 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "limited-") && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		var events corev1.EventList
		if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, "limited-") && e.Source.Component == "karpenter" &&
				e.Reason == "FailedScheduling" && strings.Contains(e.Message, "limits") {
				limited[e.InvolvedObject.Name] = true
			}
		}
		return running == 2 && len(limited) == 2, nil
	})
	if err != nil {
		t.Fatalf("%d pods running (want 2), limit events on %v (want 2 pods): %v", running, limited, err)
	}
	// A few more batch windows change nothing: the limit holds.
	time.Sleep(5 * time.Second)
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "limited"}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 2 {
		t.Errorf("%d NodeClaims for a 4-CPU limit and 2-CPU nodes, want 2", len(claims.Items))
	}
	got := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatal(err)
	}
	if cpu := got.Status.Resources[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("nodepool status.resources.cpu = %s, want 4", cpu.String())
	}
	// The controller's /metrics registry counts the two launches.
	if n := metricValue(t, "karpenter_nodeclaims_created_total", map[string]string{"nodepool": "limited", "reason": "provisioned"}); n != 2 {
		t.Errorf("karpenter_nodeclaims_created_total{nodepool=limited} = %v, want 2", n)
	}
	if n := metricValue(t, "karpenter_nodes_created_total", map[string]string{"nodepool": "limited", "zone": "zone-a"}); n != 2 {
		t.Errorf("karpenter_nodes_created_total{nodepool=limited} = %v, want 2", n)
	}
	// The cluster gauges describe the two nodes: 2 CPUs each at 0.10 $/h.
	if v := metricValue(t, "karpenter_nodepools_cost_total", map[string]string{"nodepool": "limited"}); v < 0.199 || v > 0.201 {
		t.Errorf("karpenter_nodepools_cost_total{nodepool=limited} = %v, want 0.2", v)
	}
	if v := metricValue(t, "karpenter_cluster_state_node_count", nil); v < 2 {
		t.Errorf("karpenter_cluster_state_node_count = %v, want at least the 2 nodes", v)
	}
}

// metricValue reads a counter or gauge series from controller-runtime's
// registry, the one the controller serves on its metrics address.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}
