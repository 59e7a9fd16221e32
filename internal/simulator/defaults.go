package simulator

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/internal/admission"
)

// crdDefaults applies the defaults of Nodewright's CRDs (the embedded ones
// kube-apiserver serves) to objects of their kinds on create and update,
// as the API server does: a NodePool without consolidateAfter or budgets
// gets Karpenter's, a NodeClaim its expireAfter, and so on. It is
// apiextensions-apiserver's structural defaulting (internal/admission).
type crdDefaults struct{ crds *admission.CRDs }

func loadCRDDefaults() (crdDefaults, error) {
	crds, err := admission.Embedded()
	return crdDefaults{crds: crds}, err
}

// apply defaults obj in place when its kind is one of the CRDs.
func (d crdDefaults) apply(gvk schema.GroupVersionKind, obj client.Object) error {
	if d.crds == nil || !d.crds.Handles(gvk) {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	u, err := admission.Decode(data)
	if err != nil {
		return err
	}
	d.crds.Default(gvk, u)
	if data, err = json.Marshal(u); err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}
