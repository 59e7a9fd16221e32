package termination

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

var now = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func owned(kind string) podOpt {
	return func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "x"}} }
}
func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
}
func grace(s int64) podOpt { return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s } }

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanDrainTiers(t *testing.T) {
	pods := []*corev1.Pod{
		pod("web"), pod("agent", owned("DaemonSet")), pod("dns", critical), pod("cni", critical, owned("DaemonSet")),
	}
	want := [][]string{{"web"}, {"agent"}, {"dns"}, {"cni"}}
	for step, w := range want {
		d := PlanDrain(pods, now, nil)
		if got := names(d.Evict); len(got) != len(w) || got[0] != w[0] {
			t.Fatalf("step %d evicts %v, want %v", step, got, w)
		}
		if d.Waiting != len(pods)-1 {
			t.Errorf("step %d: %d waiting, want %d", step, d.Waiting, len(pods)-1)
		}
		pods = pods[1:] // that tier is gone
	}
	if d := PlanDrain(pods, now, nil); !d.Drained() {
		t.Errorf("nothing left, but not drained: %+v", d)
	}
}

func TestPlanDrainSkipsWhatNeedNotLeave(t *testing.T) {
	deleted := metav1.NewTime(now.Add(-2 * time.Minute))
	pods := []*corev1.Pod{
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("mirror", owned("Node")),
		pod("tolerant", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists}}
		}),
		pod("stuck", func(p *corev1.Pod) { p.DeletionTimestamp = &deleted }),
	}
	if d := PlanDrain(pods, now, nil); !d.Drained() {
		t.Errorf("finished, mirror, tolerating and stuck pods hold the drain: %+v", d)
	}
}

func TestDoNotDisruptIsWaitedOnUntilTheDeadline(t *testing.T) {
	pods := []*corev1.Pod{pod("precious", doNotDisrupt, grace(30)), pod("web", grace(30))}
	d := PlanDrain(pods, now, nil)
	if got := names(d.Evict); len(got) != 1 || got[0] != "web" || d.Waiting != 1 {
		t.Errorf("evict %v waiting %d: the do-not-disrupt pod must be waited on, not evicted", got, d.Waiting)
	}
	// With the deadline 20s away and 30s of grace, both must go now, with the
	// 20s that are left.
	deadline := now.Add(20 * time.Second)
	d = PlanDrain(pods, now, &deadline)
	if len(d.Delete) != 2 || d.Delete[0].Grace != 20*time.Second || len(d.Evict) != 0 {
		t.Errorf("near the deadline: %+v", d)
	}
	// Far from it, the PDB-respecting path applies.
	deadline = now.Add(time.Hour)
	if d = PlanDrain(pods, now, &deadline); len(d.Delete) != 0 || len(d.Evict) != 1 {
		t.Errorf("far from the deadline: %+v", d)
	}
}
