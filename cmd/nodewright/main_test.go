package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCRDsPrintsEveryCRD(t *testing.T) {
	out, err := run(t, "crds")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(out, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
			t.Fatalf("a document is not a CRD: %v\n%.200s", err, doc)
		}
		names = append(names, crd.Name)
	}
	want := []string{"ec2nodeclasses.karpenter.k8s.aws", "kwoknodeclasses.karpenter.kwok.sh", "nodeclaims.karpenter.sh", "nodepools.karpenter.sh"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("crds printed %v, want %v", names, want)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "nodewright ") || !strings.Contains(out, "go1.") {
		t.Errorf("version printed %q", out)
	}
}

func TestUnknownCommandFails(t *testing.T) {
	if _, err := run(t, "frobnicate"); err == nil {
		t.Error("an unknown command succeeded")
	}
	if _, err := run(t, "crds", "extra"); err == nil {
		t.Error("crds accepted a stray argument")
	}
}

// docs/configuration.md is what the flags say now.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	t.Setenv("KUBECONFIG", "/somewhere/else") // the documented defaults are the built-in ones
	out, err := run(t, "docs")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("docs/configuration.md is stale: run 'go run ./cmd/nodewright docs > docs/configuration.md'")
	}
}
