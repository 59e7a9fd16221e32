// Command crdpatch adds to the generated CRDs the validation that kubebuilder
// markers cannot express because it sits on types Nodewright does not own:
//
//   - corev1.Taint items (taints, startupTaints): key non-empty and a qualified
//     name, value a label value, effect one of NoSchedule, PreferNoSchedule,
//     NoExecute;
//   - label maps (a template's metadata.labels): every value a label value.
//
// It rewrites each CRD file given on the command line in place. It is part of
// `make generate`, so `make verify` catches a stale CRD.
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	qualifiedNamePattern = `^(([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9]))*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	labelValuePattern    = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := patchFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %v\n", err)
			os.Exit(1)
		}
	}
}

func patchFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			walk(s.OpenAPIV3Schema, "")
		}
	}
	// Go through a generic map to drop the empty status stanza the typed
	// struct always carries, so the output stays as controller-gen wrote it.
	asJSON, err := yaml.Marshal(&crd)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(asJSON, &doc); err != nil {
		return fmt.Errorf("re-decoding %s: %w", path, err)
	}
	delete(doc, "status")
	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	out = append([]byte("---\n"), out...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// walk visits every property of the schema, patching taint lists and label maps.
func walk(s *apiextensionsv1.JSONSchemaProps, name string) {
	switch {
	case (name == "taints" || name == "startupTaints") && s.Items != nil && s.Items.Schema != nil:
		patchTaint(s.Items.Schema)
	case name == "labels" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		v := s.AdditionalProperties.Schema
		v.MaxLength = ptr(int64(63))
		v.Pattern = labelValuePattern
	}
	for k, p := range s.Properties {
		walk(&p, k)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(s.Items.Schema, "")
	}
}

func patchTaint(item *apiextensionsv1.JSONSchemaProps) {
	if key, ok := item.Properties["key"]; ok {
		key.MinLength = ptr(int64(1))
		key.Pattern = qualifiedNamePattern
		item.Properties["key"] = key
	}
	if value, ok := item.Properties["value"]; ok {
		value.Pattern = labelValuePattern
		item.Properties["value"] = value
	}
	if effect, ok := item.Properties["effect"]; ok {
		effect.Enum = nil
		for _, e := range []string{"NoSchedule", "PreferNoSchedule", "NoExecute"} {
			effect.Enum = append(effect.Enum, apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", e))})
		}
		item.Properties["effect"] = effect
	}
}

func ptr[T any](v T) *T { return &v }
