package kwok_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/providers/kwok"
)

var (
	notReady     = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	unregistered = corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}
	concurrent   = corev1.Taint{Key: "example.com/added-meanwhile", Effect: corev1.TaintEffectNoSchedule}
)

// The kubelet reports a node Ready and drops its not-ready taint from a
// cached copy that lags behind the API: writes others made meanwhile (a
// label, a taint appended, another condition) survive, and nothing
// conflicts, where updates of the whole object or status would.
func TestKubeletNodeWritesSurviveConcurrentChanges(t *testing.T) {
	ctx := context.Background()
	node := kwokNode("n1", unregistered, notReady)
	e := newKubeletEnv(t, kwok.KubeletOptions{}, node)
	e.serveStale(e.node(t, "n1"))

	// Someone (Nodewright's registration, the node lifecycle controller)
	// writes the node after the kubelet's cache saw it.
	live := e.node(t, "n1")
	live.Labels = map[string]string{"example.com/label": "set-meanwhile"}
	live.Spec.Taints = append(live.Spec.Taints, concurrent)
	if err := e.kube.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	live.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
	if err := e.kube.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	// Whole-object writes from the stale copy conflict: the old way failed.
	if err := e.kube.Status().Update(ctx, e.stale[client.ObjectKeyFromObject(node)].DeepCopyObject().(client.Object)); !apierrors.IsConflict(err) {
		t.Fatalf("a status update from the stale copy: %v, want a conflict (the test's premise)", err)
	}

	if _, err := e.reconcileNode(t, "n1"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := e.node(t, "n1")
	if want := []string{unregistered.Key, concurrent.Key}; !sameStrings(taintKeys(got), want) {
		t.Errorf("taints %v, want %v (not-ready gone, the one added meanwhile kept)", taintKeys(got), want)
	}
	if got.Labels["example.com/label"] != "set-meanwhile" {
		t.Errorf("labels %v: the label set meanwhile was lost", got.Labels)
	}
	var types []corev1.NodeConditionType
	for _, c := range got.Status.Conditions {
		types = append(types, c.Type)
		if c.Type == corev1.NodeReady && (c.Status != corev1.ConditionTrue || !c.LastHeartbeatTime.Time.Equal(start)) {
			t.Errorf("ready condition %+v, want True with a heartbeat now", c)
		}
	}
	if len(types) != 2 {
		t.Errorf("conditions %v, want MemoryPressure kept and Ready added", types)
	}
	if got.Status.Phase != corev1.NodeRunning {
		t.Errorf("phase %q", got.Status.Phase)
	}
	for _, p := range e.patches {
		if strings.Contains(p, "resourceVersion") {
			t.Errorf("patch %s carries a resource version: it could conflict", p)
		}
	}
}

// A Ready node whose not-ready taint the API server (re)applied: only the
// taint is written, and a taint appended since the cache saw the node
// stays.
func TestKubeletUntaintKeepsTaintAddedMeanwhile(t *testing.T) {
	ctx := context.Background()
	node := kwokNode("n1", notReady, unregistered)
	node.Status.Conditions = []corev1.NodeCondition{*readyAt(start)}
	e := newKubeletEnv(t, kwok.KubeletOptions{}, node)
	e.serveStale(e.node(t, "n1"))
	live := e.node(t, "n1")
	live.Spec.Taints = append(live.Spec.Taints, concurrent)
	if err := e.kube.Update(ctx, live); err != nil {
		t.Fatal(err)
	}

	if _, err := e.reconcileNode(t, "n1"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if want := []string{unregistered.Key, concurrent.Key}; !sameStrings(taintKeys(e.node(t, "n1")), want) {
		t.Errorf("taints %v, want %v", taintKeys(e.node(t, "n1")), want)
	}
	if got := e.takeWrites(); !sameStrings(got, []string{"patch Node /n1", "patch Lease kube-node-lease/n1", "create Lease kube-node-lease/n1"}) {
		t.Errorf("writes %q, want the taint patch and the lease only", got)
	}
}

func readyAt(heartbeat time.Time) *corev1.NodeCondition {
	return &corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)}
}

// When the taint list was reshuffled under the kubelet's cached copy, its
// patch fails rather than remove the wrong taint; once the cache catches
// up the retry removes the right one.
func TestKubeletUntaintRefusesReorderedTaints(t *testing.T) {
	ctx := context.Background()
	e := newKubeletEnv(t, kwok.KubeletOptions{}, kwokNode("n1", unregistered, notReady))
	e.serveStale(e.node(t, "n1"))
	live := e.node(t, "n1")
	live.Spec.Taints = []corev1.Taint{notReady, concurrent} // unregistered removed, one added
	if err := e.kube.Update(ctx, live); err != nil {
		t.Fatal(err)
	}

	if _, err := e.reconcileNode(t, "n1"); err == nil {
		t.Error("reconcile succeeded on taints reordered under it; want an error and a retry")
	}
	if want := []string{notReady.Key, concurrent.Key}; !sameStrings(taintKeys(e.node(t, "n1")), want) {
		t.Fatalf("taints %v after the refused patch, want %v untouched", taintKeys(e.node(t, "n1")), want)
	}

	e.freshReads()
	if _, err := e.reconcileNode(t, "n1"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if want := []string{concurrent.Key}; !sameStrings(taintKeys(e.node(t, "n1")), want) {
		t.Errorf("taints %v after the retry, want %v", taintKeys(e.node(t, "n1")), want)
	}
}

func lease(t *testing.T, e *kubeletEnv, name string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, l); err != nil {
		t.Fatalf("reading lease %s: %v", name, err)
	}
	return l
}

// The kubelet renews its node's lease every heartbeat interval and the
// Ready heartbeat every status interval, and writes nothing in between.
func TestKubeletHeartbeatsOnlyWhenDue(t *testing.T) {
	e := newKubeletEnv(t, kwok.KubeletOptions{HeartbeatInterval: 10 * time.Second, StatusInterval: time.Minute}, kwokNode("n1"))
	steps := []struct {
		at         time.Duration
		wantWrites []string
		wantWait   time.Duration
	}{
		{0, []string{"patch status Node /n1", "patch Lease kube-node-lease/n1", "create Lease kube-node-lease/n1"}, 10 * time.Second},
		{5 * time.Second, nil, 5 * time.Second},
		{10 * time.Second, []string{"patch Lease kube-node-lease/n1"}, 10 * time.Second},
		{15 * time.Second, nil, 5 * time.Second},
		{time.Minute, []string{"patch status Node /n1", "patch Lease kube-node-lease/n1"}, 10 * time.Second},
	}
	for _, s := range steps {
		e.clock.SetTime(start.Add(s.at))
		res, err := e.reconcileNode(t, "n1")
		if err != nil {
			t.Fatalf("at %v: %v", s.at, err)
		}
		if got := e.takeWrites(); !sameStrings(got, s.wantWrites) {
			t.Errorf("at %v: writes %q, want %q", s.at, got, s.wantWrites)
		}
		if res.RequeueAfter != s.wantWait {
			t.Errorf("at %v: next look in %v, want %v", s.at, res.RequeueAfter, s.wantWait)
		}
		l := lease(t, e, "n1")
		due := s.at.Truncate(10 * time.Second)
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(start.Add(due)) {
			t.Errorf("at %v: lease renewed at %v, want %v", s.at, l.Spec.RenewTime, start.Add(due))
		}
	}
	l := lease(t, e, "n1")
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "n1" || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v, want held by n1 for 40s", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "n1-uid" {
		t.Errorf("lease owners %+v, want the node (deleted with it)", l.OwnerReferences)
	}
	if hb := findReady(e.node(t, "n1")).LastHeartbeatTime.Time; !hb.Equal(start.Add(time.Minute)) {
		t.Errorf("ready heartbeat %v, want %v", hb, start.Add(time.Minute))
	}
}

// A kubelet that may not write leases still keeps its node alive: the
// Ready heartbeat takes the heartbeat interval instead.
func TestKubeletHeartbeatsThroughStatusWithoutLeases(t *testing.T) {
	e := newKubeletEnv(t, kwok.KubeletOptions{HeartbeatInterval: 10 * time.Second, StatusInterval: time.Minute}, kwokNode("n1"))
	e.forbidLeases = true
	if _, err := e.reconcileNode(t, "n1"); err != nil {
		t.Fatalf("reconcile with leases forbidden: %v", err)
	}
	e.takeWrites()
	e.clock.SetTime(start.Add(10 * time.Second))
	res, err := e.reconcileNode(t, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.takeWrites(), []string{"patch status Node /n1"}; !sameStrings(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	if res.RequeueAfter != 10*time.Second {
		t.Errorf("next look in %v, want 10s", res.RequeueAfter)
	}
}

func findReady(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return &corev1.NodeCondition{}
}

func TestKubeletWorkers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		workers   kwok.KubeletWorkers
		pod, node int
	}{
		{"defaults", kwok.KubeletWorkers{}, 32, 8},
		{"set", kwok.KubeletWorkers{Pods: 4, Nodes: 2}, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newKubeletEnv(t, kwok.KubeletOptions{Workers: tc.workers})
			if got := e.controller(t, ".pod").Workers; got != tc.pod {
				t.Errorf("pod workers %d, want %d", got, tc.pod)
			}
			if got := e.controller(t, ".node").Workers; got != tc.node {
				t.Errorf("node workers %d, want %d", got, tc.node)
			}
		})
	}
}
