package kwok_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/providers/kwok"
)

func TestNodeUpdate(t *testing.T) {
	created := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	opts := kwok.KubeletOptions{RegistrationDelay: 30 * time.Second, HeartbeatInterval: time.Minute}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.NodeSpec{ProviderID: "kwok://n", Taints: []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
		}},
	}

	// Before the registration delay: nothing yet, look again when it ends.
	status, spec, wait := kwok.NodeUpdate(node, created.Add(10*time.Second), opts)
	if status != nil || spec != nil || wait != 20*time.Second {
		t.Fatalf("before the delay: status %v, spec %v, wait %v", status, spec, wait)
	}

	// After it: Ready, not-ready taint gone, the unregistered taint left for
	// registration to remove.
	now := created.Add(31 * time.Second)
	status, spec, wait = kwok.NodeUpdate(node, now, opts)
	if status == nil || status.Status.Phase != corev1.NodeRunning {
		t.Fatalf("after the delay: no Ready status: %+v", status)
	}
	ready := status.Status.Conditions[0]
	if ready.Type != corev1.NodeReady || ready.Status != corev1.ConditionTrue || !ready.LastHeartbeatTime.Time.Equal(now) {
		t.Errorf("ready condition %+v", ready)
	}
	if spec == nil || len(spec.Spec.Taints) != 1 || spec.Spec.Taints[0].Key != "karpenter.sh/unregistered" {
		t.Errorf("taints after: %+v", spec)
	}
	if wait != time.Minute {
		t.Errorf("next look in %v, want the heartbeat interval", wait)
	}

	// A fresh heartbeat needs nothing; a stale one is renewed without moving
	// the transition time.
	node.Spec.Taints = spec.Spec.Taints
	node.Status = status.Status
	if s, sp, _ := kwok.NodeUpdate(node, now.Add(30*time.Second), opts); s != nil || sp != nil {
		t.Errorf("fresh heartbeat rewritten: %v %v", s, sp)
	}
	later := now.Add(2 * time.Minute)
	s, _, _ := kwok.NodeUpdate(node, later, opts)
	if s == nil || !s.Status.Conditions[0].LastHeartbeatTime.Time.Equal(later) || !s.Status.Conditions[0].LastTransitionTime.Time.Equal(now) {
		t.Errorf("stale heartbeat: %+v", s)
	}
}

func TestRunningPod(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	pending := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "app", Image: "x"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	got := kwok.RunningPod(pending, now)
	if got == nil || got.Status.Phase != corev1.PodRunning || !got.Status.StartTime.Time.Equal(now) || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("running pod: %+v", got)
	}
	for _, c := range got.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s is %s", c.Type, c.Status)
		}
	}
	unbound := pending.DeepCopy()
	unbound.Spec.NodeName = ""
	if kwok.RunningPod(unbound, now) != nil || kwok.RunningPod(got, now) != nil {
		t.Error("an unbound or already running pod was started")
	}
}
