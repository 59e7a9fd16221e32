package nodeclaim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// Liveness limits (Karpenter's).
const (
	LaunchTTL       = 5 * time.Minute
	RegistrationTTL = 15 * time.Minute
)

// Expired says why a NodeClaim has outlived its chance, or "".
func Expired(nc *karpv1.NodeClaim, now time.Time) string {
	age := now.Sub(nc.CreationTimestamp.Time)
	switch {
	case !isTrue(nc, karpv1.ConditionTypeLaunched) && age >= LaunchTTL:
		return fmt.Sprintf("not launched within %s", LaunchTTL)
	case !isTrue(nc, karpv1.ConditionTypeRegistered) && age >= RegistrationTTL:
		return fmt.Sprintf("not registered within %s", RegistrationTTL)
	}
	return ""
}

func isTrue(nc *karpv1.NodeClaim, t string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, t)
}

// SyncedNode returns the node as registration leaves it: the claim's labels
// (and karpenter.sh/registered), its annotations, its taints and startup
// taints (unless the node opts out with karpenter.sh/do-not-sync-taints), an
// owner reference to the claim, the termination finalizer, and no
// unregistered taint.
func SyncedNode(nc *karpv1.NodeClaim, node *corev1.Node) *corev1.Node {
	out := node.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		out.Labels[k] = v
	}
	out.Labels[karpv1.LabelNodeRegistered] = "true"
	for k, v := range nc.Annotations {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	if out.Labels[karpv1.LabelDoNotSyncTaints] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(out.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
				out.Spec.Taints = append(out.Spec.Taints, t)
			}
		}
	}
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.UnregisteredNoExecuteTaint) })
	if !slices.ContainsFunc(out.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nc.UID }) {
		out.OwnerReferences = append(out.OwnerReferences, metav1.OwnerReference{
			APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptrTo(true),
		})
	}
	if !slices.Contains(out.Finalizers, karpv1.TerminationFinalizer) {
		out.Finalizers = append(out.Finalizers, karpv1.TerminationFinalizer)
	}
	return out
}

// NotInitialized says what a registered node still lacks, or "" when it is
// initialized: Ready, no startup taint left, no known ephemeral taint, and
// every extended resource the claim was sized for registered.
func NotInitialized(nc *karpv1.NodeClaim, node *corev1.Node) (reason, message string) {
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		return "NodeNotReady", fmt.Sprintf("node %s is not Ready", node.Name)
	}
	for _, t := range nc.Spec.StartupTaints {
		if slices.ContainsFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
			return "StartupTaintsExist", fmt.Sprintf("startup taint %s is still on the node", t.ToString())
		}
	}
	for _, t := range node.Spec.Taints {
		if isEphemeral(t) {
			return "KnownEphemeralTaintsExist", fmt.Sprintf("taint %s is still on the node", t.ToString())
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
			continue
		}
		if a, ok := node.Status.Allocatable[name]; q.Sign() > 0 && (!ok || a.IsZero()) {
			return "ResourceNotRegistered", fmt.Sprintf("resource %s is not registered", name)
		}
	}
	return "", ""
}

// isEphemeral: the taints a starting node carries until it is ready.
func isEphemeral(t corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", karpv1.TaintKeyUnregistered:
		return true
	}
	return strings.HasPrefix(t.Key, "readiness.k8s.io/")
}

func ptrTo[T any](v T) *T { return &v }

func resourceOne() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }
