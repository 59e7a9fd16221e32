package sched

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withClaim(volume, claim string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// pvc is a claim bound to volume (as the PV controller leaves it), or
// unbound when volume is "".
func pvc(name, volume string, class *string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}}
	if volume != "" {
		c.Annotations = map[string]string{bindCompletedAnnotation: "yes"}
		c.Status.Phase = corev1.ClaimBound
	}
	return c
}

func zonalPV(name string, local bool, zones ...string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	exprs := []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}
	if local {
		pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"old-node"}})
	}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}
	return pv
}

func zonalClass(name string, isDefault bool, zones ...string) *storagev1.StorageClass {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wait,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}}
	if isDefault {
		sc.Annotations = map[string]string{defaultStorageClassAnnotation: "true"}
	}
	return sc
}

func TestVolumeTopology(t *testing.T) {
	its := zonedCatalog()
	gp3 := "gp3"
	cases := []struct {
		name       string
		pods       []*corev1.Pod
		in         Input
		wantZone   string
		wantReason string
	}{
		{
			name:     "a bound volume pins the node to its zone",
			pods:     []*corev1.Pod{pod("db", "1", "1Gi", withClaim("data", "data-db"))},
			in:       Input{PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data-db", "pv-1", &gp3)}, PersistentVolumes: []*corev1.PersistentVolume{zonalPV("pv-1", false, "zone-b")}},
			wantZone: "zone-b",
		},
		{
			name:     "a local volume's zone counts, its hostname cannot",
			pods:     []*corev1.Pod{pod("db", "1", "1Gi", withClaim("data", "data-db"))},
			in:       Input{PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data-db", "pv-1", &gp3)}, PersistentVolumes: []*corev1.PersistentVolume{zonalPV("pv-1", true, "zone-a")}},
			wantZone: "zone-a",
		},
		{
			name:     "an unbound claim goes where its StorageClass may provision",
			pods:     []*corev1.Pod{pod("db", "1", "1Gi", withClaim("data", "data-db"))},
			in:       Input{PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data-db", "", &gp3)}, StorageClasses: []*storagev1.StorageClass{zonalClass("gp3", false, "zone-c")}},
			wantZone: "zone-c",
		},
		{
			name:     "an unbound claim without a class uses the default class",
			pods:     []*corev1.Pod{pod("db", "1", "1Gi", withClaim("data", "data-db"))},
			in:       Input{PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("data-db", "", nil)}, StorageClasses: []*storagev1.StorageClass{zonalClass("standard", true, "zone-b")}},
			wantZone: "zone-b",
		},
		{
			name:       "a missing claim is reported",
			pods:       []*corev1.Pod{pod("db", "1", "1Gi", withClaim("data", "nope"))},
			wantReason: "volume data: PersistentVolumeClaim default/nope not found",
		},
		{
			name: "two volumes in different zones cannot be used together",
			pods: []*corev1.Pod{pod("db", "1", "1Gi", withClaim("a", "claim-a"), withClaim("b", "claim-b"))},
			in: Input{
				PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{pvc("claim-a", "pv-a", &gp3), pvc("claim-b", "pv-b", &gp3)},
				PersistentVolumes:      []*corev1.PersistentVolume{zonalPV("pv-a", false, "zone-a"), zonalPV("pv-b", false, "zone-b")},
			},
			wantReason: "NodePool default: the pod's own requirements on topology.kubernetes.io/zone cannot all hold",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Pods, in.NodePools = c.pods, []NodePool{nodePool("default", its)}
			plan := Solve(in)
			if c.wantReason != "" {
				if r := reasons(plan); !strings.Contains(r, c.wantReason) {
					t.Errorf("reasons %q, want %q", r, c.wantReason)
				}
				return
			}
			if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].Zone != c.wantZone {
				t.Errorf("claims %+v (reasons %s), want one in %s", plan.NodeClaims, reasons(plan), c.wantZone)
			}
		})
	}
}
