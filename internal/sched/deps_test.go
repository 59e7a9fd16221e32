package sched_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The solver must stay pure: it is run by the controller, `plan` and the
// simulator alike, and is tested without an API server.
func TestSolverDependencyBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"k8s.io/client-go",
		"sigs.k8s.io/controller-runtime",
		"github.com/prometheus/",
		"github.com/nodewright/nodewright/internal/state",
		"github.com/nodewright/nodewright/internal/controller",
		"github.com/nodewright/nodewright/pkg/cloudprovider",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list returned %d packages; is it run from internal/sched?", len(deps))
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("internal/sched depends on %s", dep)
			}
		}
	}
}
