//go:build integration

// Package chaos_test kills Nodewright's controller with SIGKILL at random
// instants while it provisions and consolidates on a real control plane,
// restarts it at once each time, and then checks what an operator cares
// about: no instance launched twice for one NodeClaim, no instance left
// without a NodeClaim once garbage collection has had its grace, every pod
// bound and Running, and no node left tainted by a disruption decision
// that no longer exists. The controller runs as a child process (the
// nodewright binary, built once), so a kill drops every in-memory
// structure, as a crash would. The controller talks to the apiserver
// through controlplane's fault proxy, which fails a seeded share of its
// writes (500, 409, or performed with the answer lost); the kwok test
// also takes a node's instance away and turns another node NotReady.
//
// The kill instants, API faults and failed nodes come from a seed
// (NODEWRIGHT_CHAOS_SEED, default defaultSeed), logged with every run so a
// failure can be replayed.
// NODEWRIGHT_CHAOS_CONTROLLER names another nodewright binary to run as
// the controller (an older build, to see a defect caught); the fake AWS
// is always the one built from this tree.
package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var (
	cp *controlplane.ControlPlane
	// nodewrightBin is the nodewright binary built for this test binary.
	nodewrightBin string
	// controllerBin runs the controller: nodewrightBin unless
	// NODEWRIGHT_CHAOS_CONTROLLER names another.
	controllerBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodewright-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	nodewrightBin = filepath.Join(dir, "nodewright")
	build := exec.Command("go", "build", "-o", nodewrightBin, "./cmd/nodewright")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building nodewright: %v\n%s", err, out)
		return 1
	}
	controllerBin = nodewrightBin
	if bin := os.Getenv("NODEWRIGHT_CHAOS_CONTROLLER"); bin != "" {
		controllerBin = bin
	}
	return controlplane.Main(m, controlplane.Options{ControllerManager: true, Scheduler: true}, &cp)
}
