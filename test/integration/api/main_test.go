//go:build integration

// Package api_test checks Nodewright's CRDs against a real kube-apiserver: the
// manifests users wrote for Karpenter v1 apply unchanged, defaults are filled
// in, and invalid objects are rejected with a message naming the field.
package api_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/nodewright/nodewright/api/crds"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var (
	cp     *controlplane.ControlPlane
	dyn    dynamic.Interface
	binDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	binDir, err = controlplane.FindBinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	manifests, err := crds.Manifests()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{BinDir: binDir, CRDs: manifests})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	dyn, err = dynamic.NewForConfig(cp.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
