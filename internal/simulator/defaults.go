package simulator

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/api/crds"
)

// crdDefaults applies the defaults of Nodewright's CRDs (the embedded ones
// kube-apiserver serves) to objects of their kinds on create and update,
// as the API server does: a NodePool without consolidateAfter or budgets
// gets Karpenter's, a NodeClaim its expireAfter, and so on.
//
// The walk is kube-apiserver's structural defaulting (a property absent
// from an object gets its schema default; objects, array items and map
// values are walked) over the v1 schema types. apiextensions-apiserver's
// own defaulting package would bring the API server's CEL and feature-gate
// machinery into the binary for these few lines.
type crdDefaults map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps

func loadCRDDefaults() (crdDefaults, error) {
	manifests, err := crds.Manifests()
	if err != nil {
		return nil, err
	}
	out := crdDefaults{}
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(m, crd); err != nil {
			return nil, fmt.Errorf("reading an embedded CRD: %w", err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out, nil
}

// apply defaults obj in place when its kind is one of the CRDs.
func (d crdDefaults) apply(gvk schema.GroupVersionKind, obj client.Object) error {
	s, ok := d[gvk]
	if !ok {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var u any
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if err := defaultValue(u, s); err != nil {
		return err
	}
	if data, err = json.Marshal(u); err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}

// defaultValue fills the defaults of s into x (a decoded JSON value).
func defaultValue(x any, s *apiextensionsv1.JSONSchemaProps) error {
	switch v := x.(type) {
	case map[string]any:
		for name, prop := range s.Properties {
			if _, present := v[name]; !present && prop.Default != nil {
				var def any
				if err := json.Unmarshal(prop.Default.Raw, &def); err != nil {
					return fmt.Errorf("default of %s: %w", name, err)
				}
				v[name] = def
			}
			if child, present := v[name]; present {
				if err := defaultValue(child, &prop); err != nil {
					return err
				}
			}
		}
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
			for name, child := range v {
				if _, known := s.Properties[name]; !known {
					if err := defaultValue(child, ap.Schema); err != nil {
						return err
					}
				}
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range v {
				if err := defaultValue(item, s.Items.Schema); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
