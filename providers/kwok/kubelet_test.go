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
	opts := kwok.KubeletOptions{RegistrationDelay: 30 * time.Second, HeartbeatInterval: 10 * time.Second, StatusInterval: time.Minute}
	taints := []corev1.Taint{
		{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	}
	booted := created.Add(31 * time.Second)
	readySince := func(heartbeat, transition time.Time) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(transition)}}
	}
	for _, tc := range []struct {
		name       string
		now        time.Time
		taints     []corev1.Taint
		conditions []corev1.NodeCondition
		// wantReady: the Ready condition posted (nil: none); its heartbeat
		// is now.
		wantReady      bool
		wantTransition time.Time
		wantUntaint    []int
		wantRegistered bool
		wantWait       time.Duration
	}{{
		name: "booting: nothing until the registration delay ends", now: created.Add(10 * time.Second), taints: taints,
		wantWait: 20 * time.Second,
	}, {
		name: "booted: Ready now, every not-ready taint removed, others left", now: booted, taints: taints,
		wantReady: true, wantTransition: booted, wantUntaint: []int{1, 3}, wantRegistered: true, wantWait: time.Minute,
	}, {
		name: "Unknown (a stopped kubelet) turns Ready again", now: booted,
		conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastHeartbeatTime: metav1.NewTime(booted)}},
		wantReady:  true, wantTransition: booted, wantRegistered: true, wantWait: time.Minute,
	}, {
		name: "fresh heartbeat: nothing until it is a minute old", now: booted.Add(40 * time.Second), conditions: readySince(booted, booted),
		wantRegistered: true, wantWait: 20 * time.Second,
	}, {
		name: "stale heartbeat renewed, transition time kept", now: booted.Add(time.Minute), conditions: readySince(booted, booted.Add(-time.Hour)),
		wantReady: true, wantTransition: booted.Add(-time.Hour), wantRegistered: true, wantWait: time.Minute,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(created)},
				Spec:       corev1.NodeSpec{ProviderID: "kwok://n", Taints: tc.taints},
				Status:     corev1.NodeStatus{Conditions: tc.conditions},
			}
			w := kwok.NodeUpdate(node, tc.now, opts)
			switch {
			case !tc.wantReady && w.Ready != nil:
				t.Errorf("posts %+v, want nothing", w.Ready)
			case tc.wantReady && w.Ready == nil:
				t.Error("posts no Ready condition")
			case tc.wantReady:
				r := w.Ready
				if r.Type != corev1.NodeReady || r.Status != corev1.ConditionTrue || !r.LastHeartbeatTime.Time.Equal(tc.now) || !r.LastTransitionTime.Time.Equal(tc.wantTransition) {
					t.Errorf("posts %+v, want Ready True, heartbeat %v, transition %v", r, tc.now, tc.wantTransition)
				}
			}
			if len(w.Untaint) != len(tc.wantUntaint) {
				t.Fatalf("removes taints %v, want %v", w.Untaint, tc.wantUntaint)
			}
			for i := range w.Untaint {
				if w.Untaint[i] != tc.wantUntaint[i] {
					t.Errorf("removes taints %v, want %v", w.Untaint, tc.wantUntaint)
				}
			}
			if w.Registered != tc.wantRegistered || w.Wait != tc.wantWait {
				t.Errorf("registered %t, next look in %v; want %t, %v", w.Registered, w.Wait, tc.wantRegistered, tc.wantWait)
			}
		})
	}
}

func TestNodeUpdateStatusNeverMoreOftenThanHeartbeat(t *testing.T) {
	created := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(created)}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(created)},
	}}}
	// The simulator's hour-long heartbeat stretches the status interval too.
	opts := kwok.KubeletOptions{HeartbeatInterval: time.Hour}
	if w := kwok.NodeUpdate(node, created.Add(30*time.Minute), opts); w.Ready != nil || w.Wait != 30*time.Minute {
		t.Errorf("half an hour in: posts %v, next look in %v; want nothing for 30m", w.Ready, w.Wait)
	}
}

func TestRunningStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	pending := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "app", Image: "x"}, {Name: "sidecar", Image: "y"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	scheduled := pending.DeepCopy()
	scheduled.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	running := pending.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	unbound := pending.DeepCopy()
	unbound.Spec.NodeName = ""
	deleting := pending.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		// want are the conditions posted, all True; nil: nothing posted.
		want []corev1.PodConditionType
	}{
		{"bound without kube-scheduler: PodScheduled too", pending, []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}},
		{"scheduled: kube-scheduler's condition left to it", scheduled, []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}},
		{"running already", running, nil},
		{"unbound", unbound, nil},
		{"being deleted", deleting, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kwok.RunningStatus(tc.pod, now)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("posts %+v, want nothing", got)
				}
				return
			}
			if got == nil || got.Phase != corev1.PodRunning || !got.StartTime.Time.Equal(now) {
				t.Fatalf("posts %+v, want Running since %v", got, now)
			}
			if len(got.Conditions) != len(tc.want) {
				t.Fatalf("conditions %+v, want %v", got.Conditions, tc.want)
			}
			for i, c := range got.Conditions {
				if c.Type != tc.want[i] || c.Status != corev1.ConditionTrue {
					t.Errorf("condition %d is %s=%s, want %s=True", i, c.Type, c.Status, tc.want[i])
				}
			}
			if len(got.ContainerStatuses) != 2 {
				t.Fatalf("container statuses %+v, want one per container", got.ContainerStatuses)
			}
			for _, s := range got.ContainerStatuses {
				if !s.Ready || s.State.Running == nil || s.Started == nil || !*s.Started {
					t.Errorf("container %s not running and ready: %+v", s.Name, s)
				}
			}
		})
	}
}
