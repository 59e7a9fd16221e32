package sched

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/internal/sched/requirement"
)

// defaultStorageClassAnnotation marks the cluster's default StorageClass.
const defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// volumeIndex resolves a pod's PersistentVolumeClaims to the zones (or other
// node labels) their volumes can be used from.
type volumeIndex struct {
	pvcs      map[string]*corev1.PersistentVolumeClaim // namespace/name
	pvs       map[string]*corev1.PersistentVolume
	classes   map[string]*storagev1.StorageClass
	defaultSC *storagev1.StorageClass
}

func newVolumeIndex(in Input) *volumeIndex {
	vi := &volumeIndex{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, c := range in.PersistentVolumeClaims {
		vi.pvcs[c.Namespace+"/"+c.Name] = c
	}
	for _, v := range in.PersistentVolumes {
		vi.pvs[v.Name] = v
	}
	for _, sc := range in.StorageClasses {
		vi.classes[sc.Name] = sc
		if sc.Annotations[defaultStorageClassAnnotation] == "true" {
			vi.defaultSC = sc
		}
	}
	return vi
}

// alternatives returns the node requirements the pod's volumes allow, as
// alternatives (any one will do): the cross product, over volumes, of each
// volume's terms. No volume topology gives one empty alternative.
func (vi *volumeIndex) alternatives(pod *corev1.Pod) ([]requirement.Requirements, error) {
	alts := []requirement.Requirements{{}}
	for _, v := range pod.Spec.Volumes {
		terms, err := vi.volumeTerms(pod, v)
		if err != nil {
			return nil, err
		}
		if len(terms) == 0 {
			continue
		}
		var next []requirement.Requirements
		for _, a := range alts {
			for _, t := range terms {
				rs := a.Clone()
				rs.AddAll(t)
				next = append(next, rs)
			}
		}
		alts = next
	}
	return alts, nil
}

// volumeTerms: one volume's alternatives; nil when it does not constrain.
func (vi *volumeIndex) volumeTerms(pod *corev1.Pod, v corev1.Volume) ([]requirement.Requirements, error) {
	var claimName string
	var ephemeralClass *string
	switch {
	case v.PersistentVolumeClaim != nil:
		claimName = v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
		claimName = pod.Name + "-" + v.Name
		ephemeralClass = v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
	default:
		return nil, nil
	}
	pvc, ok := vi.pvcs[pod.Namespace+"/"+claimName]
	if !ok {
		if v.Ephemeral == nil {
			return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s not found", v.Name, pod.Namespace, claimName)
		}
		return vi.classTerms(v.Name, ephemeralClass) // created with the pod, not bound yet
	}
	if pvc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s is being deleted", v.Name, pvc.Namespace, pvc.Name)
	}
	if pvc.Status.Phase == corev1.ClaimLost {
		return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s is Lost: its volume is gone", v.Name, pvc.Namespace, pvc.Name)
	}
	if pvc.Spec.VolumeName == "" {
		return vi.unboundTerms(v.Name, pvc)
	}
	if pvc.Annotations[bindCompletedAnnotation] != "yes" {
		return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s names volume %s but its binding is not complete (no %s annotation): waiting for the PV controller",
			v.Name, pvc.Namespace, pvc.Name, pvc.Spec.VolumeName, bindCompletedAnnotation)
	}
	pv, ok := vi.pvs[pvc.Spec.VolumeName]
	if !ok {
		return nil, fmt.Errorf("volume %s: PersistentVolume %s of claim %s/%s not found", v.Name, pvc.Spec.VolumeName, pvc.Namespace, pvc.Name)
	}
	if pv.DeletionTimestamp != nil {
		return nil, fmt.Errorf("volume %s: PersistentVolume %s of claim %s/%s is being deleted", v.Name, pv.Name, pvc.Namespace, pvc.Name)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	var out []requirement.Requirements
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		var exprs []corev1.NodeSelectorRequirement
		for _, e := range term.MatchExpressions {
			if local && e.Key == corev1.LabelHostname {
				continue // a new node cannot have that name; the zone still counts
			}
			exprs = append(exprs, e)
		}
		rs, err := requirement.FromNodeSelector(exprs)
		if err != nil {
			return nil, fmt.Errorf("volume %s: PersistentVolume %s node affinity: %w", v.Name, pv.Name, err)
		}
		out = append(out, rs)
	}
	return out, nil
}

// bindCompletedAnnotation is set by the PV controller on a claim once its
// binding to spec.volumeName is done.
const bindCompletedAnnotation = "pv.kubernetes.io/bind-completed"

// unboundTerms: where an unbound claim can be provisioned. Like Karpenter,
// a pod waits while its claim cannot bind on the pod's node: a claim with
// no StorageClass (storageClassName "") binds only to a volume made for it,
// and one whose class binds Immediately is bound by the PV controller
// before kube-scheduler places the pod. A claim with no class named at all
// takes the default class, if the input has one (the API server names it
// on create), and is otherwise not constrained.
func (vi *volumeIndex) unboundTerms(volume string, pvc *corev1.PersistentVolumeClaim) ([]requirement.Requirements, error) {
	name := pvc.Spec.StorageClassName
	if name != nil && *name == "" {
		return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s is unbound and has no StorageClass (storageClassName \"\"): only a volume made for it can bind it", volume, pvc.Namespace, pvc.Name)
	}
	sc := vi.defaultSC
	if name != nil {
		var ok bool
		if sc, ok = vi.classes[*name]; !ok {
			return nil, fmt.Errorf("volume %s: StorageClass %s not found", volume, *name)
		}
	}
	if sc != nil && (sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate) {
		return nil, fmt.Errorf("volume %s: PersistentVolumeClaim %s/%s is unbound and StorageClass %s binds Immediately: the pod waits until the PV controller binds it", volume, pvc.Namespace, pvc.Name, sc.Name)
	}
	return vi.classTerms(volume, name)
}

// classTerms: an unbound claim can be provisioned where its StorageClass's
// allowedTopologies allow.
func (vi *volumeIndex) classTerms(volume string, className *string) ([]requirement.Requirements, error) {
	var sc *storagev1.StorageClass
	switch {
	case className == nil:
		sc = vi.defaultSC
	case *className == "":
		return nil, nil // static binding only; no class to provision from
	default:
		var ok bool
		if sc, ok = vi.classes[*className]; !ok {
			return nil, fmt.Errorf("volume %s: StorageClass %s not found", volume, *className)
		}
	}
	if sc == nil || len(sc.AllowedTopologies) == 0 {
		return nil, nil
	}
	var out []requirement.Requirements
	for _, term := range sc.AllowedTopologies {
		var rs requirement.Requirements
		for _, e := range term.MatchLabelExpressions {
			r, err := requirement.New(e.Key, corev1.NodeSelectorOpIn, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("volume %s: StorageClass %s allowedTopologies: %w", volume, sc.Name, err)
			}
			rs.Add(r)
		}
		out = append(out, rs)
	}
	return out, nil
}

// applyVolumes folds the pod's volume topology into its node-affinity
// alternatives.
func (vi *volumeIndex) applyVolumes(p *podState) {
	alts, err := vi.alternatives(p.pod)
	if err != nil {
		p.invalid = err
		return
	}
	if len(alts) == 1 && alts[0].Len() == 0 {
		return
	}
	var terms []requirement.Requirements
	for _, t := range p.terms {
		for _, a := range alts {
			rs := t.Clone()
			rs.AddAll(a)
			terms = append(terms, rs)
		}
	}
	p.terms = terms
}
