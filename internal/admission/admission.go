package admission

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/api/crds"
)

// CRDs holds, per kind and version, kube-apiserver's create strategy for
// it and its structural schema.
type CRDs struct {
	versions map[schema.GroupVersionKind]*version
}

type version struct {
	namespaced bool
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	rules      *cel.Validator
	// status: a create drops the status; specReplicas: the scale
	// subresource's spec path, if any.
	status       bool
	specReplicas string
}

var (
	loadOnce sync.Once
	loaded   *CRDs
	loadErr  error
)

// Embedded returns the checks for the CRDs embedded in the binary, built
// once.
func Embedded() (*CRDs, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*CRDs, error) {
	manifests, err := crds.Manifests()
	if err != nil {
		return nil, err
	}
	out := &CRDs{versions: map[schema.GroupVersionKind]*version{}}
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(m, crd); err != nil {
			return nil, fmt.Errorf("reading an embedded CRD: %w", err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			ver, err := newVersion(crd, v)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
			}
			out.versions[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = ver
		}
	}
	return out, nil
}

// newVersion builds what kube-apiserver builds to serve one version: the
// structural schema, the schema validators and the custom resource
// strategy (schema, scale, object meta, list types and CEL rules).
func newVersion(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) (*version, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("converting its schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("schema is not structural: %w", err)
	}
	validator, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	out := &version{
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: structural, schema: validator,
		rules: cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
	if sub := v.Subresources; sub != nil {
		out.status = sub.Status != nil
		if sub.Scale != nil {
			out.specReplicas = sub.Scale.SpecReplicasPath
		}
	}
	return out, nil
}

// Handles reports whether gvk is one of the CRDs' kinds and versions.
func (c *CRDs) Handles(gvk schema.GroupVersionKind) bool {
	_, ok := c.versions[gvk]
	return ok
}

// Default fills obj's absent fields with the schema's defaults, in place,
// as kube-apiserver does on create and on every read. Objects of other
// kinds are left alone. obj holds JSON values as apimachinery decodes them
// (integers as int64: see Decode).
func (c *CRDs) Default(gvk schema.GroupVersionKind, obj map[string]any) {
	if v, ok := c.versions[gvk]; ok {
		structuraldefaulting.Default(obj, v.structural)
	}
}

// Validate returns the error kube-apiserver would answer creating obj
// with (an Invalid status error naming the kind, the object and each
// field), or nil. obj should be defaulted first; it is not modified. A
// create drops the status of a kind with a status subresource, so the
// status is not checked. Objects of other kinds are valid.
func (c *CRDs) Validate(ctx context.Context, gvk schema.GroupVersionKind, obj map[string]any) error {
	v, ok := c.versions[gvk]
	if !ok {
		return nil
	}
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	if v.status {
		delete(u.Object, "status") // a create cannot set it
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		u.SetName(u.GetGenerateName() + "x7k2q") // the API server names it before validating
	}
	errs := v.validate(ctx, u)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gvk.GroupKind(), u.GetName(), errs)
}

// validate is kube-apiserver's custom resource create validation, in its
// order: object meta, the OpenAPI schema, the scale subresource's replicas,
// list types, then the CEL rules unless an earlier error makes them unsafe
// to evaluate.
func (v *version) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	meta := &metav1.ObjectMeta{}
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata"), nil, err.Error()))
		}
	}
	errs = append(errs, apivalidation.ValidateObjectMeta(meta, v.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, validation.ValidateCustomResource(nil, u.Object, v.schema)...)
	if v.specReplicas != "" {
		path := strings.TrimPrefix(v.specReplicas, ".")
		replicas, _, err := unstructured.NestedInt64(u.Object, strings.Split(path, ".")...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(v.specReplicas), replicas, err.Error()))
		case replicas < 0:
			errs = append(errs, field.Invalid(field.NewPath(v.specReplicas), replicas, "should be a non-negative integer"))
		case replicas > math.MaxInt32:
			errs = append(errs, field.Invalid(field.NewPath(v.specReplicas), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
		}
	}
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, u.Object)...)
	if blocking(errs) {
		return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	ruleErrs, _ := v.rules.Validate(ctx, nil, v.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, ruleErrs...)
}

// blocking: errors after which kube-apiserver does not evaluate CEL rules
// (the object's shape may not be what the rules expect).
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// Decode reads a JSON object the way kube-apiserver does: integers become
// int64 (CEL rules and the schema tell integers from numbers).
func Decode(js []byte) (map[string]any, error) {
	var out map[string]any
	if err := utiljson.Unmarshal(js, &out); err != nil {
		return nil, err
	}
	return out, nil
}
