//go:build integration

// Package chart_test checks the Helm chart: it lints and renders with
// the pinned helm v4 CLI (hack/helm), renders what a production install
// needs, and its RBAC is enough: the controllers run against the real
// control plane as the chart's ServiceAccount, not as admin.
package chart_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{ControllerManager: true, Scheduler: true}, &cp))
}

const chartDir = "../../../charts/nodewright"

// helm runs the pinned helm CLI: $NODEWRIGHT_HELM (make builds it), or
// one built from hack/helm for this test run.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("NODEWRIGHT_HELM")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "helm")
		build := exec.Command("go", "build", "-o", bin, "helm.sh/helm/v4/cmd/helm")
		build.Dir = "../../../hack/helm"
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building helm: %v\n%s", err, out)
		}
		t.Setenv("NODEWRIGHT_HELM", bin)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
