package crds_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	"github.com/nodewright/nodewright/api/crds"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
)

func load(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	names, files, err := crds.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, n := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(files[n], crd); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[crd.Name] = crd
	}
	return out
}

func TestEmbeddedCRDs(t *testing.T) {
	got := load(t)
	want := map[string]string{
		"nodepools.karpenter.sh":            "v1",
		"nodeclaims.karpenter.sh":           "v1",
		"ec2nodeclasses.karpenter.k8s.aws":  "v1",
		"kwoknodeclasses.karpenter.kwok.sh": "v1alpha1",
	}
	if len(got) != len(want) {
		t.Errorf("embedded %d CRDs, want %d", len(got), len(want))
	}
	for name, version := range want {
		crd, ok := got[name]
		if !ok {
			t.Errorf("%s is not embedded", name)
			continue
		}
		if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
			t.Errorf("%s is %s, want Cluster scoped", name, crd.Spec.Scope)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != version || !crd.Spec.Versions[0].Storage {
			t.Errorf("%s versions = %+v, want one storage version %s", name, crd.Spec.Versions, version)
		}
		if !slices.Contains(crd.Spec.Names.Categories, "karpenter") {
			t.Errorf("%s is not in the karpenter category", name)
		}
	}
	if sub := got["nodepools.karpenter.sh"].Spec.Versions[0].Subresources; sub == nil || sub.Scale == nil ||
		sub.Scale.SpecReplicasPath != ".spec.replicas" || sub.Scale.StatusReplicasPath != ".status.nodes" {
		t.Errorf("NodePool scale subresource = %+v, want .spec.replicas / .status.nodes", sub)
	}
}

// The CEL rules that restrict the provider label domains carry a literal list
// of the provider's well-known labels; it must match the Go list.
func TestRestrictedDomainRulesMatchWellKnownLabels(t *testing.T) {
	domains := map[string][]string{
		awsv1.Group:        awsv1.WellKnownLabels,
		kwokv1alpha1.Group: {kwokv1alpha1.LabelNodeClass, kwokv1alpha1.LabelInstanceSize, kwokv1alpha1.LabelInstanceFamily, kwokv1alpha1.LabelInstanceCPU, kwokv1alpha1.LabelInstanceMemory},
	}
	quoted := regexp.MustCompile(`'([^']+)'`)
	for _, crdName := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh"} {
		crd := load(t)[crdName]
		rules := collectRules(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
		for domain, labels := range domains {
			msg := `label domain "` + domain + `" is restricted`
			found := 0
			for _, r := range rules {
				if r.Message != msg {
					continue
				}
				found++
				var listed []string
				for _, m := range quoted.FindAllStringSubmatch(r.Rule, -1) {
					if strings.HasPrefix(m[1], domain+"/") {
						listed = append(listed, m[1])
					}
				}
				slices.Sort(listed)
				want := slices.Sorted(slices.Values(labels))
				if !slices.Equal(listed, want) {
					t.Errorf("%s: rule %q allows %v, Go lists %v", crdName, msg, listed, want)
				}
			}
			if found == 0 {
				t.Errorf("%s has no rule %q", crdName, msg)
			}
		}
	}
}

func collectRules(s *apiextensionsv1.JSONSchemaProps) apiextensionsv1.ValidationRules {
	if s == nil {
		return nil
	}
	rules := append(apiextensionsv1.ValidationRules{}, s.XValidations...)
	for _, p := range s.Properties {
		rules = append(rules, collectRules(&p)...)
	}
	if s.Items != nil {
		rules = append(rules, collectRules(s.Items.Schema)...)
	}
	if s.AdditionalProperties != nil {
		rules = append(rules, collectRules(s.AdditionalProperties.Schema)...)
	}
	return rules
}
