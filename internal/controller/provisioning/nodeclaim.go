package provisioning

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/nodepool"
	"github.com/nodewright/nodewright/internal/sched"
)

// NodeClaimFor builds the NodeClaim to create for a planned claim of a
// NodePool, as Karpenter writes it: named <nodepool>-<random>, owned by the
// NodePool (so deleting the pool deletes its claims), carrying the
// template's labels and annotations plus karpenter.sh/nodepool and the
// NodeClass label (<group>/<lowercase kind>), and the template's taints,
// startup taints, NodeClass, termination grace period and expiry. The
// requirements and resource requests are the plan's.
func NodeClaimFor(np *karpv1.NodePool, planned sched.NodeClaim) (*karpv1.NodeClaim, error) {
	tmpl := np.Spec.Template
	labels := map[string]string{}
	for k, v := range tmpl.ObjectMeta.Labels {
		labels[k] = v
	}
	labels[karpv1.LabelNodePool] = np.Name
	if ref := tmpl.Spec.NodeClassRef; ref != nil {
		labels[ref.Group+"/"+strings.ToLower(ref.Kind)] = ref.Name
	}
	var annotations map[string]string
	if len(tmpl.ObjectMeta.Annotations) > 0 {
		annotations = map[string]string{}
		for k, v := range tmpl.ObjectMeta.Annotations {
			annotations[k] = v
		}
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           planned.Requirements,
			Resources:              karpv1.ResourceRequirements{Requests: planned.Requests},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
	if planned.MinValuesRelaxed {
		nc.Annotations = withAnnotation(nc.Annotations, karpv1.AnnotationNodeClaimMinValuesRelaxed, "true")
	}
	hash, err := nodepool.Hash(np)
	if err != nil {
		return nil, err
	}
	nc.Annotations, _ = nodepool.Stamped(nc.Annotations, hash)
	return nc, nil
}

func withAnnotation(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func ptrTo[T any](v T) *T { return &v }
