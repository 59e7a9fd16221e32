package disruption

import (
	"os/exec"
	"strings"
	"testing"
)

// The planners are pure: no client machinery, no metrics.
func TestDependencyBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "github.com/prometheus/", "github.com/nodewright/nodewright/internal/controller"} {
			if strings.HasPrefix(dep, f) {
				t.Errorf("internal/disruption depends on %s", dep)
			}
		}
	}
}
