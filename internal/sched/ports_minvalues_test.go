package sched

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func withHostPort(port int32, proto corev1.Protocol, ip string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: proto, HostIP: ip})
	}
}

func TestHostPorts(t *testing.T) {
	its := smallCatalog()
	cases := []struct {
		name         string
		in           Input
		wantClaims   int
		wantExisting int
		wantReason   string
	}{
		{
			name:       "two pods binding the same host port need two nodes",
			in:         Input{Pods: []*corev1.Pod{pod("a", "100m", "64Mi", withHostPort(8080, "", "")), pod("b", "100m", "64Mi", withHostPort(8080, "", ""))}},
			wantClaims: 2,
		},
		{
			name:       "different protocols share a node",
			in:         Input{Pods: []*corev1.Pod{pod("a", "100m", "64Mi", withHostPort(53, corev1.ProtocolTCP, "")), pod("b", "100m", "64Mi", withHostPort(53, corev1.ProtocolUDP, ""))}},
			wantClaims: 1,
		},
		{
			name:       "distinct specific host IPs share a node",
			in:         Input{Pods: []*corev1.Pod{pod("a", "100m", "64Mi", withHostPort(80, "", "10.0.0.1")), pod("b", "100m", "64Mi", withHostPort(80, "", "10.0.0.2"))}},
			wantClaims: 1,
		},
		{
			name:       "a wildcard host IP conflicts with a specific one",
			in:         Input{Pods: []*corev1.Pod{pod("a", "100m", "64Mi", withHostPort(80, "", "0.0.0.0")), pod("b", "100m", "64Mi", withHostPort(80, "", "10.0.0.2"))}},
			wantClaims: 2,
		},
		{
			name: "a running pod's host port keeps the node from a second binder",
			in: Input{
				Pods:  []*corev1.Pod{pod("b", "100m", "64Mi", withHostPort(9000, "", ""))},
				Nodes: []Node{{Name: "n", Initialized: true, Allocatable: rl("cpu", "4", "memory", "4Gi", "pods", "10"), Pods: []*corev1.Pod{pod("a", "100m", "64Mi", withHostPort(9000, "", ""))}}},
			},
			wantClaims: 1,
		},
		{
			name: "a DaemonSet's host port rules a pool out",
			in: Input{
				Pods:          []*corev1.Pod{pod("exporter", "100m", "64Mi", withHostPort(9100, "", ""))},
				DaemonSetPods: []*corev1.Pod{pod("node-exporter", "50m", "32Mi", withHostPort(9100, "", ""))},
			},
			wantReason: "NodePool default: a DaemonSet pod on its nodes binds the same host port",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.NodePools = []NodePool{nodePool("default", its)}
			plan := Solve(c.in)
			if c.wantReason != "" {
				if r := reasons(plan); !strings.Contains(r, c.wantReason) {
					t.Errorf("reasons %q, want %q", r, c.wantReason)
				}
				return
			}
			if len(plan.NodeClaims) != c.wantClaims || len(plan.Unschedulable) != 0 {
				t.Errorf("%d claims (want %d), unschedulable: %s", len(plan.NodeClaims), c.wantClaims, reasons(plan))
			}
		})
	}
}

func TestMinValues(t *testing.T) {
	its := smallCatalog()
	flexible := func(n int) poolOpt {
		return func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: &n})
		}
	}
	// A 3 CPU pod fits medium, large and gpu: three types.
	plan := Solve(Input{Pods: []*corev1.Pod{pod("a", "3", "1Gi")}, NodePools: []NodePool{nodePool("default", its, flexible(3))}})
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].InstanceTypeOptions) < 3 {
		t.Fatalf("claims %+v, reasons %s", plan.NodeClaims, reasons(plan))
	}
	var found bool
	for _, r := range plan.NodeClaims[0].Requirements {
		found = found || (r.Key == corev1.LabelInstanceTypeStable && r.MinValues != nil && *r.MinValues == 3)
	}
	if !found {
		t.Errorf("the claim's requirements lost minValues: %v", plan.NodeClaims[0].Requirements)
	}
	// A 10 CPU pod fits only large (gpu has 8 CPUs): one type, short of four.
	plan = Solve(Input{Pods: []*corev1.Pod{pod("b", "10", "1Gi")}, NodePools: []NodePool{nodePool("default", its, flexible(4))}})
	if r := reasons(plan); !strings.Contains(r, "minValues: node.kubernetes.io/instance-type needs 4 distinct values, the instance types that fit offer 1") {
		t.Errorf("reasons %q", r)
	}
	// Pods join a claim only while it keeps enough options.
	plan = Solve(Input{Pods: []*corev1.Pod{pod("c", "3", "1Gi"), pod("d", "3", "1Gi")}, NodePools: []NodePool{nodePool("default", its, flexible(3))}})
	if len(plan.NodeClaims) != 2 {
		t.Errorf("%d claims: two 3 CPU pods together fit only large and gpu, short of minValues 3, so they need two nodes", len(plan.NodeClaims))
	}
}

func TestMinValuesBestEffort(t *testing.T) {
	n := 4
	flexible := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: &n})
	}
	in := Input{Pods: []*corev1.Pod{pod("b", "10", "1Gi")}, NodePools: []NodePool{nodePool("default", smallCatalog(), flexible)}, MinValuesPolicy: MinValuesBestEffort}
	plan := Solve(in)
	if len(plan.NodeClaims) != 1 || !plan.NodeClaims[0].MinValuesRelaxed {
		t.Fatalf("BestEffort: claims %+v, reasons %s; want one claim marked relaxed", plan.NodeClaims, reasons(plan))
	}
	in.Pods = []*corev1.Pod{pod("a", "3", "1Gi")}
	n = 3
	if plan := Solve(in); len(plan.NodeClaims) != 1 || plan.NodeClaims[0].MinValuesRelaxed {
		t.Errorf("a claim that meets minValues is not relaxed: %+v", plan.NodeClaims)
	}
}
