package admission

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var (
	nodePool     = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	ec2NodeClass = schema.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}
)

func decode(t *testing.T, y string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Decode(js)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

const pool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`

// The word-for-word comparison with kube-apiserver is the integration test
// test/integration/api (TestInvalidManifestsAreRejected); these pin the
// behaviour without an API server.
func TestValidate(t *testing.T) {
	crds, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		doc  string
		want []string // fragments of the error; none: valid
	}{
		{name: "valid NodePool", gvk: nodePool, doc: pool},
		{name: "misspelt operator", gvk: nodePool, doc: strings.Replace(pool, "operator: In", "operator: Inn", 1),
			want: []string{`NodePool.karpenter.sh "default" is invalid`, `spec.template.spec.requirements[0].operator: Unsupported value: "Inn"`,
				"some validation rules were not checked"}},
		{name: "a CEL rule", gvk: nodePool, doc: pool + "  replicas: 2\n  weight: 10\n",
			want: []string{"spec: Invalid value: 'weight' cannot be set on static NodePools"}},
		{name: "the scale subresource's replicas", gvk: nodePool, doc: pool + "  replicas: -1\n",
			want: []string{"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0", ".spec.replicas: Invalid value: -1: should be a non-negative integer"}},
		{name: "metadata name", gvk: nodePool, doc: strings.Replace(pool, "name: default}", "name: Not_A_Name}", 1),
			want: []string{"metadata.name: Invalid value: \"Not_A_Name\""}},
		{name: "status is not checked on create", gvk: nodePool, doc: pool + "status:\n  conditions: [{type: Ready}]\n"},
		{name: "generateName instead of a name", gvk: nodePool, doc: strings.Replace(pool, "metadata: {name: default}", "metadata: {generateName: web-}", 1)},
		{name: "EC2NodeClass alias with another family", gvk: ec2NodeClass, doc: `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: Bottlerocket
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
`, want: []string{"amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.doc)
			crds.Default(tc.gvk, obj)
			err := crds.Validate(context.Background(), tc.gvk, obj)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("rejected a valid object: %v", err)
				}
				return
			}
			if err == nil || !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestDefault(t *testing.T) {
	crds, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	obj := decode(t, pool)
	crds.Default(nodePool, obj)
	spec := obj["spec"].(map[string]any)
	disruption, _ := spec["disruption"].(map[string]any)
	if disruption["consolidateAfter"] != "0s" || disruption["consolidationPolicy"] != "WhenEmptyOrUnderutilized" {
		t.Errorf("disruption defaulted to %v, want Karpenter's", disruption)
	}
	if got := spec["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"]; got != "720h" {
		t.Errorf("expireAfter defaulted to %v, want 720h", got)
	}
	other := map[string]any{"spec": map[string]any{}}
	crds.Default(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, other)
	if len(other["spec"].(map[string]any)) != 0 {
		t.Error("defaulted an object of another kind")
	}
}
