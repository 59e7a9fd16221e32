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

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// `nodewright crds | kubectl apply -f -` is how users install the CRDs. This
// runs on a fresh control plane that has never seen them, as a new user's
// cluster would be.
func TestCRDsCommandAppliesWithKubectl(t *testing.T) {
	ctx := context.Background()
	out, err := exec.CommandContext(ctx, "go", "run", "../../../cmd/nodewright", "crds").Output()
	if err != nil {
		t.Fatalf("nodewright crds: %v", err)
	}
	fresh, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := fresh.Stop(); err != nil {
			t.Error(err)
		}
	}()
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, binDir+"/kubectl", append([]string{"--kubeconfig", fresh.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, got)
		}
		return string(got)
	}
	names := []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws", "kwoknodeclasses.karpenter.kwok.sh"}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--dry-run=client", "-f", "-"}, "created (dry run)"},
		{[]string{"apply", "-f", "-"}, "created"},
		{[]string{"apply", "--dry-run=client", "-f", "-"}, "unchanged (dry run)"},
		{[]string{"apply", "--server-side", "--force-conflicts", "-f", "-"}, "serverside-applied"},
	}
	for _, step := range steps {
		got := run(string(out), step.args...)
		for _, name := range names {
			if !strings.Contains(got, "customresourcedefinition.apiextensions.k8s.io/"+name+" "+step.want) {
				t.Errorf("kubectl %s: want %s %s, got:\n%s", strings.Join(step.args, " "), name, step.want, got)
			}
		}
	}
	// The installed CRDs serve the seed NodePool.
	run("", "wait", "--for=condition=Established", "--timeout=30s", "crd/nodepools.karpenter.sh")
	got := run("", "apply", "-f", "../../../testdata/seed/nodepool-default.yaml")
	if !strings.Contains(got, "nodepool.karpenter.sh/default created") {
		t.Errorf("applying the seed NodePool after installing the CRDs with kubectl: %s", got)
	}
}

func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalNodePool, "columns")))
	mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalNodeClaim, "columns")))
	mustCreate(ctx, t, parse(t, fmt.Sprintf(minimalEC2NodeClass, "columns")))

	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"get", "nodepools", "columns"}, []string{"NAME", "NODECLASS", "NODES", "READY", "AGE"}},
		{[]string{"get", "nodepools", "columns", "-o", "wide"}, []string{"NODECLASS", "WEIGHT", "CPU", "MEMORY"}},
		{[]string{"get", "nodeclaims", "columns"}, []string{"TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"}},
		{[]string{"get", "nodeclaims", "columns", "-o", "wide"}, []string{"IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED"}},
		{[]string{"get", "ec2nc", "columns", "-o", "wide"}, []string{"READY", "AGE", "ROLE"}},
	}
	for _, c := range cases {
		out, err := kubectl(ctx, t, "", c.args...)
		if err != nil {
			t.Fatal(err)
		}
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		for _, col := range c.want {
			found := false
			for _, h := range header {
				found = found || h == col
			}
			if !found {
				t.Errorf("kubectl %s: no %s column in %v", strings.Join(c.args, " "), col, header)
			}
		}
	}
	out, err := kubectl(ctx, t, "", "get", "nodepools", "columns", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "default") {
		t.Errorf("the NODECLASS column does not show the nodeClassRef name:\n%s", out)
	}
	// `kubectl get karpenter` lists every Nodewright object through the category.
	out, err = kubectl(ctx, t, "", "get", "karpenter")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nodepool.karpenter.sh/columns", "nodeclaim.karpenter.sh/columns", "ec2nodeclass.karpenter.k8s.aws/columns"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get karpenter does not list %s:\n%s", want, out)
		}
	}
}

// The scale subresource reports a pool's node count and sets a static pool's
// replicas (kubectl scale nodepool).
func TestNodePoolScaleSubresource(t *testing.T) {
	ctx := context.Background()
	np := parse(t, fmt.Sprintf(minimalNodePool, "static"))
	setPath(t, np.Object, "spec.replicas", "2")
	mustCreate(ctx, t, np)

	if _, err := kubectl(ctx, t, "", "scale", "nodepool", "static", "--replicas=5"); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(nodePools).Get(ctx, "static", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Errorf("after kubectl scale, spec.replicas = %d, want 5", r)
	}
	scale, err := dyn.Resource(nodePools).Get(ctx, "static", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); r != 5 {
		t.Errorf("scale subresource spec.replicas = %d, want 5", r)
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas"); r != 0 {
		t.Errorf("scale subresource status.replicas = %d, want 0 (no nodes yet)", r)
	}
}
