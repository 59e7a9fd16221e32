package state

import (
	"os/exec"
	"strings"
	"testing"
)

// The model is fed plain objects and tested without an API server: it must
// not grow a dependency on client machinery.
func TestDependencyBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "github.com/prometheus/", "github.com/nodewright/nodewright/internal/controller"} {
			if strings.HasPrefix(dep, f) {
				t.Errorf("internal/state depends on %s", dep)
			}
		}
	}
}
