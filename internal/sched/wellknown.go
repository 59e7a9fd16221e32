package sched

import (
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

// WellKnownLabels returns the label keys every launched node defines: the
// core set and the AWS and kwok providers' labels.
func WellKnownLabels() map[string]bool {
	keys := []string{
		karpv1.LabelNodePool,
		karpv1.LabelCapacityType,
		corev1.LabelTopologyZone,
		corev1.LabelTopologyRegion,
		corev1.LabelInstanceTypeStable,
		corev1.LabelArchStable,
		corev1.LabelOSStable,
		corev1.LabelWindowsBuild,
		awsv1.LabelTopologyZoneID,
		kwokv1alpha1.LabelNodeClass,
		kwokv1alpha1.LabelInstanceSize,
		kwokv1alpha1.LabelInstanceFamily,
		kwokv1alpha1.LabelInstanceCPU,
		kwokv1alpha1.LabelInstanceMemory,
	}
	keys = append(keys, awsv1.WellKnownLabels...)
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}
