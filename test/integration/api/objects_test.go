//go:build integration

package api_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var (
	nodePools       = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaims      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	ec2NodeClasses  = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	kwokNodeClasses = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// resourceFor maps a kind in these tests to its resource.
func resourceFor(t *testing.T, kind string) dynamic.ResourceInterface {
	t.Helper()
	switch kind {
	case "NodePool":
		return dyn.Resource(nodePools)
	case "NodeClaim":
		return dyn.Resource(nodeClaims)
	case "EC2NodeClass":
		return dyn.Resource(ec2NodeClasses)
	case "KWOKNodeClass":
		return dyn.Resource(kwokNodeClasses)
	}
	t.Fatalf("unknown kind %q", kind)
	return nil
}

// parse decodes one YAML document into an unstructured object.
func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("test manifest is not YAML: %v\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: obj}
}

// create submits obj the way `kubectl apply` does: unknown fields are errors.
func create(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	return resourceFor(t, obj.GetKind()).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
}

// mustCreate creates obj and deletes it when the test ends.
func mustCreate(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := create(ctx, t, obj)
	if err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	t.Cleanup(func() {
		_ = resourceFor(t, obj.GetKind()).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
	})
	return got
}

// setPath sets a dotted path in obj to the YAML value, creating maps on the way.
func setPath(t *testing.T, obj map[string]any, path, value string) {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		t.Fatalf("value for %s is not YAML: %v", path, err)
	}
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// deletePath removes a dotted path from obj.
func deletePath(obj map[string]any, path string) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, parts[len(parts)-1])
}

// kubectl runs the kubectl built with the control plane against it.
func kubectl(ctx context.Context, t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binDir+"/kubectl", append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// contains reports where want is not a subset of got: every field the user
// wrote must be stored as written (nothing pruned, nothing rewritten).
func contains(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: stored %T, wrote a map", path, got)}
		}
		var diffs []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: dropped by the API server", path, k))
				continue
			}
			diffs = append(diffs, contains(path+"."+k, gv, wv)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: stored %v, wrote %v", path, got, want)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, contains(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return diffs
	default:
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return []string{fmt.Sprintf("%s: stored %v, wrote %v", path, got, want)}
		}
		return nil
	}
}
