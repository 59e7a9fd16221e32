package kwok_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodewright/nodewright/providers/kwok"
)

func (e *kubeletEnv) reconcilePod(t *testing.T, name string) (reconcile.Result, error) {
	t.Helper()
	return e.controller(t, ".pod").Reconciler.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}})
}

func boundPod(name, uid, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// The kubelet starts a pod from a cached copy that lags behind the API:
// its status patch succeeds (an update from that copy conflicts), keeps
// what others wrote meanwhile, and carries no resource version.
func TestKubeletRunsPodChangedMeanwhile(t *testing.T) {
	ctx := context.Background()
	scheduledAt := metav1.NewTime(start.Add(-time.Minute))
	pod := boundPod("web", "web-1", "n1")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduledAt}}
	e := newKubeletEnv(t, kwok.KubeletOptions{}, kwokNode("n1"), pod)
	stale := &corev1.Pod{}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(pod), stale); err != nil {
		t.Fatal(err)
	}
	e.serveStale(stale)

	live := stale.DeepCopy()
	live.Labels = map[string]string{"example.com/label": "set-meanwhile"}
	if err := e.kube.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	live.Status.Conditions = append(live.Status.Conditions, corev1.PodCondition{Type: "example.com/Gate", Status: corev1.ConditionTrue})
	if err := e.kube.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	running := stale.DeepCopy()
	running.Status = *kwok.RunningStatus(stale, start)
	if err := e.kube.Status().Update(ctx, running); !apierrors.IsConflict(err) {
		t.Fatalf("a status update from the stale copy: %v, want a conflict (the test's premise)", err)
	}

	if _, err := e.reconcilePod(t, "web"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := &corev1.Pod{}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || got.Status.StartTime == nil || len(got.Status.ContainerStatuses) != 1 {
		t.Errorf("status %+v, want Running with its container", got.Status)
	}
	if got.Labels["example.com/label"] != "set-meanwhile" {
		t.Errorf("labels %v: the label set meanwhile was lost", got.Labels)
	}
	conds := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got.Status.Conditions {
		conds[c.Type] = c
	}
	for _, want := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, "example.com/Gate"} {
		if c, ok := conds[want]; !ok || c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s: %+v, want True", want, c)
		}
	}
	if at := conds[corev1.PodScheduled].LastTransitionTime; !at.Time.Equal(scheduledAt.Time) {
		t.Errorf("kube-scheduler's PodScheduled moved to %v, want %v", at, scheduledAt)
	}
	if len(e.patches) != 1 || strings.Contains(e.patches[0], "resourceVersion") {
		t.Errorf("patches %q: want one, without a resource version", e.patches)
	}
}

// A pod being deleted is removed at once, unless the name now belongs to a
// new pod (a StatefulSet's, recreated while the cache still showed the old
// one being deleted): that one is left alone.
func TestKubeletFinishesDeletedPods(t *testing.T) {
	for _, tc := range []struct {
		name       string
		recreated  bool
		wantStored types.UID // "" : gone
		// wantDeletes: the deletes sent (once, however often the stale
		// cache shows the removed pod); -1: not checked.
		wantDeletes int
	}{
		{"the pod being deleted is removed, once", false, "", 1},
		{"a pod recreated under the same name is not", true, "web-2", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			stored := boundPod("web", "web-1", "n1")
			if tc.recreated {
				stored = boundPod("web", "web-2", "n1")
			}
			e := newKubeletEnv(t, kwok.KubeletOptions{}, kwokNode("n1"), stored)
			// The cache shows web-1 being deleted (the fake client cannot
			// hold a deleted pod without finalizers, so only the cache does).
			deleting := boundPod("web", "web-1", "n1")
			deleting.DeletionTimestamp = &metav1.Time{Time: start}
			e.serveStale(deleting)

			// Twice: the cache still shows the pod after the kubelet removed it.
			for range 2 {
				if _, err := e.reconcilePod(t, "web"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if got := e.takeWrites(); tc.wantDeletes >= 0 && len(got) != tc.wantDeletes {
				t.Errorf("writes %q, want %d deletes", got, tc.wantDeletes)
			}
			got := &corev1.Pod{}
			err := e.kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, got)
			switch {
			case tc.wantStored == "" && !apierrors.IsNotFound(err):
				t.Errorf("pod still there (%v, uid %s), want it removed", err, got.UID)
			case tc.wantStored != "" && (err != nil || got.UID != tc.wantStored):
				t.Errorf("pod %s: %v (uid %s), want %s kept", "web", err, got.UID, tc.wantStored)
			}
		})
	}
}

// Pods on nodes the kubelet does not play belong to a real kubelet.
func TestKubeletLeavesOtherKubeletsPods(t *testing.T) {
	other := kwokNode("real")
	other.Spec.ProviderID = "aws:///us-east-1a/i-0123"
	e := newKubeletEnv(t, kwok.KubeletOptions{}, other, boundPod("web", "web-1", "real"))
	if _, err := e.reconcilePod(t, "web"); err != nil {
		t.Fatal(err)
	}
	if w := e.takeWrites(); len(w) != 0 {
		t.Errorf("writes %q to a real kubelet's pod", w)
	}
}
