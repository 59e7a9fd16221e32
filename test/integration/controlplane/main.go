package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nodewright/nodewright/api/crds"
)

// Main is a test binary's TestMain body: it starts a control plane with
// opts (the binaries found by FindBinDir, Nodewright's CRDs installed),
// points *cp at it, runs the tests and stops it. It returns the exit code.
func Main(m *testing.M, opts Options, cp **ControlPlane) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := FindBinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if opts.CRDs, err = crds.Manifests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts.BinDir = dir
	if *cp, err = Start(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		return 1
	}
	defer func() { _ = (*cp).Stop() }()
	return m.Run()
}
