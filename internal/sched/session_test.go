package sched

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sessionNode is an initialized node of cpu CPUs in a zone with pods.
func sessionNode(name, zone, cpu string, pods ...*corev1.Pod) Node {
	return Node{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone},
		Allocatable: rl("cpu", cpu, "memory", "64Gi", "pods", "110"), Pods: pods, Initialized: true, NodePool: "default"}
}

func everyPod(*corev1.Pod) bool { return true }

func TestSessionDrain(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	type ask struct {
		node string
		ok   bool
		why  string // part of the reason when not ok
	}
	cases := []struct {
		name       string
		nodes      []Node
		candidates []string
		asks       []ask
	}{{
		name: "moved pods move again, and the last node has nowhere to go",
		nodes: []Node{
			sessionNode("a", "z1", "4", pod("p1", "1", "1Gi")),
			sessionNode("b", "z1", "4", pod("p2", "1", "1Gi")),
			sessionNode("c", "z1", "4", pod("p3", "1", "1Gi")),
		},
		candidates: []string{"a", "b", "c"},
		asks:       []ask{{"a", true, ""}, {"b", true, ""}, {"c", false, "CPU or memory"}},
	}, {
		name: "a failed drain is reverted: the room it took is back",
		nodes: []Node{
			sessionNode("a", "z1", "4", pod("big-1", "1500m", "1Gi"), pod("big-2", "1500m", "1Gi")),
			sessionNode("b", "z1", "2"),
			sessionNode("c", "z1", "2", pod("c-0", "1", "1Gi")),
			sessionNode("d", "z1", "2", pod("whole", "2", "1Gi")),
		},
		candidates: []string{"a", "d"},
		// a's pods: one fits b, the other nowhere (c has 1 CPU left); then
		// d's pod needs all of b, which it has only if a's try was undone.
		asks: []ask{{"a", false, "too little room"}, {"d", true, ""}},
	}, {
		name: "required anti-affinity keeps a second replica off a node",
		nodes: []Node{
			sessionNode("a", "z1", "4", pod("web-1", "1", "1Gi", withLabels("app", "web"), withAntiAffinity(corev1.LabelHostname, web))),
			sessionNode("b", "z1", "4", pod("web-2", "1", "1Gi", withLabels("app", "web"), withAntiAffinity(corev1.LabelHostname, web))),
			sessionNode("c", "z1", "4"),
		},
		candidates: []string{"a", "b"},
		asks:       []ask{{"a", true, ""}, {"b", false, "pod (anti-)affinity"}},
	}, {
		name: "a pod moving within its zone is not counted twice by its spread",
		nodes: []Node{
			sessionNode("a", "z1", "4", pod("web-1", "1", "1Gi", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, web))),
			sessionNode("b", "z1", "4", pod("web-2", "1", "1Gi", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, web))),
			sessionNode("c", "z2", "1", pod("web-3", "1", "1Gi", withLabels("app", "web"), withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, web))),
		},
		candidates: []string{"a"},
		asks:       []ask{{"a", true, ""}},
	}, {
		name: "daemonset pods go with their node",
		nodes: []Node{
			sessionNode("a", "z1", "4", pod("app", "1", "1Gi"), pod("ds", "3", "1Gi")),
			sessionNode("b", "z1", "2"),
		},
		candidates: []string{"a"},
		asks:       []ask{{"a", true, ""}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewSession(Input{Nodes: tc.nodes}, tc.candidates, func(p *corev1.Pod) bool { return p.Name != "ds" })
			for _, a := range tc.asks {
				u := x.Drain(a.node)
				if (u == nil) != a.ok {
					t.Fatalf("Drain(%s) = %s, want ok=%v", a.node, reasonOf(u), a.ok)
				}
				if u != nil && !strings.Contains(u.Reason, a.why) {
					t.Errorf("Drain(%s) reason %q, want it to mention %q", a.node, u.Reason, a.why)
				}
				if x.Gone(a.node) != a.ok {
					t.Errorf("Gone(%s) = %v after the drain", a.node, x.Gone(a.node))
				}
			}
		})
	}
}

func TestSessionSpreadBlocksAndRevertRestoresCounts(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	spread := withSpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, web)
	nodes := []Node{
		sessionNode("a", "z2", "4", pod("web-1", "1", "1Gi", withLabels("app", "web"), spread)),
		sessionNode("b", "z1", "4", pod("web-2", "1", "1Gi", withLabels("app", "web"), spread)),
		sessionNode("c", "z2", "3500m", pod("filler", "3500m", "1Gi")),
		sessionNode("d", "z1", "4"),
		sessionNode("e", "z1", "1", pod("web-3", "1", "1Gi", withLabels("app", "web"), spread)),
	}
	x := NewSession(Input{Nodes: nodes}, []string{"a", "b", "c"}, everyPod)
	if u := x.Drain("elsewhere"); u == nil || u.Pod != nil {
		t.Fatalf("Drain of a node the session does not know = %s, want a failure naming no pod", reasonOf(u))
	}
	// a's web pod has room only in z1 (b, d), which would then hold 3 web
	// pods against none in z2.
	if u := x.Drain("a"); u == nil || !strings.Contains(u.Reason, "topology spread") {
		t.Fatalf("Drain(a) = %s, want the spread to hold it", reasonOf(u))
	}
	// The failed try must leave the counts as they were: b's pod may move
	// to d (z1 1+1, z2 1) only if a's pod counts in z2 again.
	if u := x.Drain("b"); u != nil {
		t.Fatalf("Drain(b) after the reverted try = %s, want ok", reasonOf(u))
	}
	mark := x.Mark()
	if u := x.Drain("c"); u == nil {
		t.Fatal("Drain(c): its pod has no room left anywhere, want a failure")
	}
	if x.Mark() != mark || x.Gone("c") {
		t.Errorf("a failed drain left %d journal entries and Gone(c)=%v", x.Mark()-mark, x.Gone("c"))
	}
	x.Revert(0)
	if x.Gone("b") {
		t.Error("Revert(0) left b gone")
	}
	if u := x.Drain("b"); u != nil {
		t.Fatalf("Drain(b) after Revert(0) = %s, want ok again", reasonOf(u))
	}
}

func reasonOf(u *Unschedulable) string {
	switch {
	case u == nil:
		return "ok"
	case u.Pod == nil:
		return u.Reason
	}
	return u.Pod.Name + ": " + u.Reason
}
