package termination

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Reasons of the VolumesDetached condition and its event (Karpenter's).
const (
	ReasonAwaitingVolumeDetachment      = "AwaitingVolumeDetachment"
	ReasonTerminationGracePeriodElapsed = "TerminationGracePeriodElapsed"
)

// PendingAttachments names the VolumeAttachments that still hold volumes on
// the node, leaving out those of the volumes kept: volumes of pods a drain
// leaves on the node, which will never detach before the instance goes.
func PendingAttachments(vas []storagev1.VolumeAttachment, nodeName string, kept map[string]bool) []string {
	var out []string
	for _, va := range vas {
		if va.Spec.NodeName != nodeName || va.DeletionTimestamp != nil && !va.Status.Attached {
			continue
		}
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && kept[*pv] {
			continue
		}
		out = append(out, va.Name)
	}
	return out
}

// awaitVolumes reports whether the instance must wait for volumes to
// detach from the drained node; after the termination deadline it waits no
// longer. pods are the node's pods left after the drain.
func (c *Controller) awaitVolumes(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod) (bool, error) {
	vas := &storagev1.VolumeAttachmentList{}
	if err := c.kube.List(ctx, vas); err != nil {
		return false, fmt.Errorf("listing volume attachments of node %s: %w", node.Name, err)
	}
	kept := map[string]bool{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.kube.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, fmt.Errorf("reading claim %s/%s of pod %s: %w", p.Namespace, v.PersistentVolumeClaim.ClaimName, p.Name, err)
				}
				continue
			}
			kept[pvc.Spec.VolumeName] = pvc.Spec.VolumeName != ""
		}
	}
	pending := PendingAttachments(vas.Items, node.Name, kept)
	switch deadline := deadlineOf(nc); {
	case len(pending) == 0:
		c.setCondition(ctx, nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, karpv1.ConditionTypeVolumesDetached, "")
		return false, nil
	case deadline != nil && !c.clock.Now().Before(*deadline):
		c.setCondition(ctx, nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionFalse, ReasonTerminationGracePeriodElapsed,
			fmt.Sprintf("%d volume attachments left at the termination deadline", len(pending)))
		return false, nil
	default:
		c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonAwaitingVolumeDetachment, "Awaiting deletion of %d VolumeAttachments bound to node", len(pending))
		c.setCondition(ctx, nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, ReasonAwaitingVolumeDetachment,
			fmt.Sprintf("waiting for %d volume attachments: %v", len(pending), pending))
		return true, nil
	}
}

// volumeRequeue is how often a node waiting on volumes is looked at again.
const volumeRequeue = 2 * time.Second
