package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// candidate builds an initialized, registered, Ready candidate created at epoch
// whose last pod event was idle ago.
func candidate(name string, np *karpv1.NodePool, idle time.Duration, pods ...*corev1.Pod) Candidate {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(-24 * time.Hour))}}
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(epoch.Add(-24 * time.Hour))}}
	nc.Status.LastPodEventTime = metav1.NewTime(epoch.Add(-idle))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return Candidate{NodeClaim: nc, Node: node, NodePool: np, Pods: pods}
}

func podOf(name, ownerKind string, annotations map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations}}
	if ownerKind != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: ownerKind, Name: "owner", Controller: &yes}}
	}
	return p
}

func whenEmpty(after string, budgets ...karpv1.Budget) *karpv1.NodePool {
	np := pool(budgets...)
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(after)
	return np
}

func names(cs []Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return strings.Join(out, ",")
}

func TestEmptiness(t *testing.T) {
	np := whenEmpty("30s", karpv1.Budget{Nodes: "100%"})
	doNotDisrupt := map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	cands := []Candidate{
		candidate("a-empty", np, time.Minute),
		candidate("b-daemons-only", np, time.Minute, podOf("agent", "DaemonSet", nil)),
		candidate("c-busy", np, time.Minute, podOf("web", "ReplicaSet", nil)),
		candidate("d-recent", np, 10*time.Second),
		candidate("e-protected", np, time.Minute, podOf("agent", "DaemonSet", doNotDisrupt)),
		func() Candidate {
			c := candidate("f-node-protected", np, time.Minute)
			c.Node.Annotations = doNotDisrupt
			return c
		}(),
		func() Candidate { c := candidate("g-nominated", np, time.Minute); c.Nominated = true; return c }(),
		func() Candidate { c := candidate("h-unregistered", np, time.Minute); c.Node = nil; return c }(),
	}
	d, err := Emptiness(cands, epoch)
	if err != nil {
		t.Fatal(err)
	}
	// Any pod's do-not-disrupt holds its node, a DaemonSet pod's too.
	if got := names(d.Command.Candidates); got != "a-empty,b-daemons-only" {
		t.Errorf("emptiness takes %q", got)
	}
	for name, want := range map[string]string{
		"c-busy": "not empty", "d-recent": "consolidateAfter (30s) has not elapsed", "f-node-protected": "do-not-disrupt",
		"e-protected": "pod default/agent has karpenter.sh/do-not-disrupt",
		"g-nominated": "nominated", "h-unregistered": "not registered",
	} {
		if !strings.Contains(d.Stays[name], want) {
			t.Errorf("%s stays because %q, want %q", name, d.Stays[name], want)
		}
	}
}

func TestEmptinessHonoursBudgetsAndPolicy(t *testing.T) {
	t.Run("budget of one with one disrupting already", func(t *testing.T) {
		np := whenEmpty("30s", karpv1.Budget{Nodes: "2"})
		going := candidate("a-going", np, time.Hour)
		now := metav1.NewTime(epoch)
		going.NodeClaim.DeletionTimestamp = &now
		d, err := Emptiness([]Candidate{going, candidate("b", np, time.Hour), candidate("c", np, time.Hour)}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(d.Command.Candidates); got != "b" {
			t.Errorf("takes %q, want only b (budget 2, one disrupting)", got)
		}
		if !strings.Contains(d.Stays["c"], "budget") {
			t.Errorf("c stays because %q, want the budget named", d.Stays["c"])
		}
	})
	t.Run("consolidateAfter Never", func(t *testing.T) {
		np := whenEmpty("Never")
		d, _ := Emptiness([]Candidate{candidate("a", np, 100*time.Hour)}, epoch)
		if len(d.Command.Candidates) != 0 || !strings.Contains(d.Stays["a"], "Never") {
			t.Errorf("command %v, stays %v: consolidateAfter Never keeps every node", names(d.Command.Candidates), d.Stays)
		}
	})
	t.Run("oldest first, per pool", func(t *testing.T) {
		a, b := whenEmpty("0s", karpv1.Budget{Nodes: "1"}), whenEmpty("0s", karpv1.Budget{Nodes: "1"})
		b.Name = "other"
		young, old := candidate("young", a, time.Hour), candidate("old", a, time.Hour)
		old.NodeClaim.CreationTimestamp = metav1.NewTime(epoch.Add(-48 * time.Hour))
		d, _ := Emptiness([]Candidate{young, old, candidate("x", b, time.Hour)}, epoch)
		got := names(d.Command.Candidates)
		if !slices.Contains(strings.Split(got, ","), "old") || !slices.Contains(strings.Split(got, ","), "x") || strings.Contains(got, "young") {
			t.Errorf("takes %q, want the oldest of each pool (old, x)", got)
		}
	})
}

func TestExpired(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(epoch)}}
	nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	if ok, left := Expired(nc, epoch.Add(719*time.Hour)); ok || left != time.Hour {
		t.Errorf("at 719h: expired %v, left %s", ok, left)
	}
	if ok, _ := Expired(nc, epoch.Add(720*time.Hour)); !ok {
		t.Error("at 720h: not expired")
	}
	nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	if ok, left := Expired(nc, epoch.Add(10000*time.Hour)); ok || left != 0 {
		t.Errorf("Never: expired %v, left %s", ok, left)
	}
}

func TestDoNotDisrupt(t *testing.T) {
	started := func(ago time.Duration) *metav1.Time { t := metav1.NewTime(epoch.Add(-ago)); return &t }
	cases := []struct {
		name    string
		value   string
		started *metav1.Time
		want    bool
	}{
		{"true", "true", started(time.Hour), true},
		{"a duration not yet over", "30m", started(10 * time.Minute), true},
		{"a duration over", "30m", started(time.Hour), false},
		{"a duration, pod not started", "30m", nil, true},
		{"false", "false", started(time.Minute), false},
		{"not a duration: ignored", "soon", started(time.Minute), false},
		{"negative: ignored", "-5m", started(time.Minute), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := podOf("p", "ReplicaSet", map[string]string{karpv1.AnnotationDoNotDisrupt: tc.value})
			p.Status.StartTime = tc.started
			if got := DoNotDisrupt(p, epoch); got != tc.want {
				t.Errorf("DoNotDisrupt(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
	if DoNotDisrupt(podOf("plain", "ReplicaSet", nil), epoch) {
		t.Error("a pod without the annotation holds its node")
	}
}
