package termination

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

func attachment(name, node, pv string) storagev1.VolumeAttachment {
	return storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}
}

func TestPendingAttachments(t *testing.T) {
	detaching := attachment("detached", "n1", "pv-d")
	now := metav1.Now()
	detaching.DeletionTimestamp, detaching.Status.Attached = &now, false
	vas := []storagev1.VolumeAttachment{attachment("a", "n1", "pv-a"), attachment("kept", "n1", "pv-k"), attachment("other-node", "n2", "pv-o"), detaching}
	got := PendingAttachments(vas, "n1", map[string]bool{"pv-k": true})
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("pending %v, want only a: not another node's, not a kept pod's volume, not one already detached", got)
	}
}

// A drained node's instance waits for its volumes to detach, except those
// of pods the drain leaves behind, and waits no longer than the
// termination deadline.
func TestAwaitVolumes(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Annotations: map[string]string{
		karpv1.AnnotationNodeClaimTerminationTime: start.Add(time.Minute).Format(time.RFC3339)}}}
	data := attachment("data", "n1", "pv-data")
	agent := attachment("agent", "n1", "pv-agent")
	agentClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "agent-state", Namespace: "kube-system"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-agent"}}
	// The agent tolerates the disrupted taint, so the drain leaves it.
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}, Spec: corev1.PodSpec{
		NodeName: "n1", Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "agent-state"}}}}}}
	kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodeClaim{}).
		WithObjects(node, nc, &data, &agent, agentClaim, agentPod).Build()
	clk := clocktesting.NewFakeClock(start)
	c := New(kube, nil, clk, record.NewFakeRecorder(10), nil)
	ctx := context.Background()
	condition := func() string {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeVolumesDetached)
		if cond == nil {
			return ""
		}
		return string(cond.Status) + "/" + cond.Reason
	}
	pods := []*corev1.Pod{agentPod}

	if waiting, err := c.awaitVolumes(ctx, nc, node, pods); err != nil || !waiting {
		t.Fatalf("with the data volume attached: waiting %v, %v", waiting, err)
	}
	if got := condition(); got != "Unknown/AwaitingVolumeDetachment" {
		t.Errorf("condition %s", got)
	}
	// The deadline passes with the data volume still attached: go on.
	clk.Step(time.Minute)
	if waiting, err := c.awaitVolumes(ctx, nc, node, pods); err != nil || waiting {
		t.Fatalf("past the deadline: waiting %v, %v", waiting, err)
	}
	if got := condition(); got != "False/TerminationGracePeriodElapsed" {
		t.Errorf("condition %s", got)
	}
	// Detached in time (only the agent's volume left): go on, detached.
	if err := kube.Delete(ctx, &data); err != nil {
		t.Fatal(err)
	}
	clk.Step(-2 * time.Minute)
	if waiting, err := c.awaitVolumes(ctx, nc, node, pods); err != nil || waiting {
		t.Fatalf("with only the agent's volume: waiting %v, %v", waiting, err)
	}
	if got := condition(); got != "True/VolumesDetached" {
		t.Errorf("condition %s", got)
	}
}
