//go:build integration

package kwok_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/api/crds"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// The control plane running the real kwok controller: started by the first
// test that needs it, stopped by TestMain.
var (
	realOnce sync.Once
	realCP   *controlplane.ControlPlane
	realErr  error
)

// realKWOK returns the control plane with the real kwok controller,
// kube-controller-manager and kube-scheduler. Without a kwok binary
// ($NODEWRIGHT_KWOK_BIN) the test is skipped, except in CI (CI=true), where
// it fails: CI must never silently skip the real kwok.
func realKWOK(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	bin := controlplane.KWOKBinary()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set, and CI must run the tests against the real kwok: run them with `make test-integration`, which builds kwok", controlplane.EnvKWOKBin)
		}
		t.Skipf("%s is not set: skipping the test against the real kwok controller (`make kwok` builds it; `make test-integration` sets it)", controlplane.EnvKWOKBin)
	}
	realOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		dir, err := controlplane.FindBinDir()
		if err != nil {
			realErr = err
			return
		}
		manifests, err := crds.Manifests()
		if err != nil {
			realErr = err
			return
		}
		realCP, realErr = controlplane.Start(ctx, controlplane.Options{
			BinDir: dir, ControllerManager: true, Scheduler: true, CRDs: manifests, KWOK: bin,
		})
	})
	if realErr != nil {
		t.Fatalf("starting the control plane with the real kwok (%s): %v", bin, realErr)
	}
	return realCP
}

// stopRealKWOK stops that control plane, if started, and checks that none
// of its processes, kwok included, outlives Stop.
func stopRealKWOK() error {
	if realCP == nil {
		return nil
	}
	pids := realCP.Pids()
	if err := realCP.Stop(); err != nil {
		return fmt.Errorf("stopping the control plane with the real kwok: %w", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("process %d of the control plane with the real kwok is still running after Stop", pid)
		}
	}
	return nil
}

// realClient is an admin client of the control plane c.
func realClient(t *testing.T, c *controlplane.ControlPlane) client.Client {
	t.Helper()
	s, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// roomyCatalog: two on-demand types in one zone, with room for many pods.
func roomyCatalog(t *testing.T) []catalog.InstanceType {
	t.Helper()
	types, err := catalog.Parse("real-kwok", []byte(`[
	  {"name": "r-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	   "resources": {"cpu": "4", "memory": "16Gi", "pods": "200"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.2}]},
	  {"name": "r-16x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	   "resources": {"cpu": "16", "memory": "64Gi", "pods": "200"},
	   "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.8}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
