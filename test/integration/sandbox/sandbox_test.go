//go:build integration

// Package sandbox_test does what a new user of `make sandbox` would: start
// it, apply the quickstart, scale, watch nodes come and go, stop it, and
// finds nothing left running.
package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
)

func TestSandboxFromStartToStop(t *testing.T) {
	ctx := context.Background()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sandbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sandbox")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the sandbox: %v\n%s", err, out)
	}
	state := filepath.Join(t.TempDir(), "state")
	up := exec.Command(bin, "up", "--state", state)
	up.Dir = root
	out, err := up.Output()
	if err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out)
	}
	pids := readPids(t, state)
	t.Cleanup(func() { _ = exec.Command(bin, "down", "--state", state).Run() })

	// The two lines: the environment, then what to apply.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "export KUBECONFIG=") || !strings.HasPrefix(lines[1], "kubectl apply -f examples/") {
		t.Fatalf("sandbox up printed:\n%s", out)
	}
	env := os.Environ()
	for _, kv := range strings.Fields(strings.TrimPrefix(lines[0], "export ")) {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+strings.ReplaceAll(v, "$PATH", os.Getenv("PATH")))
	}
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command("kubectl", args...)
		cmd.Dir, cmd.Env = root, env
		for _, kv := range env { // kubectl itself is found on the printed PATH
			if p, ok := strings.CutPrefix(kv, "PATH="); ok {
				if found, err := lookPath("kubectl", p); err == nil {
					cmd.Path = found
				}
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	kubectl(strings.Fields(strings.TrimPrefix(lines[1], "kubectl "))...)

	kubeconfig := strings.TrimPrefix(strings.Fields(lines[0])[1], "KUBECONFIG=")
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubectl("scale", "deployment", "web", "--replicas=12")
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			log, _ := os.ReadFile(filepath.Join(state, "sandbox.log"))
			t.Fatalf("%s: %v\nsandbox log tail:\n%s", what, err, tail(string(log), 40))
		}
	}
	poll("12 web pods running on Nodewright's nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		var nodes corev1.NodeList
		if err := kube.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
			return false, err
		}
		return running == 12 && len(nodes.Items) > 0, nil
	})
	kubectl("scale", "deployment", "web", "--replicas=0")
	poll("every node removed once empty", 5*time.Minute, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := kube.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
			return false, err
		}
		return len(nodes.Items) == 0, nil
	})

	down := exec.Command(bin, "down", "--state", state)
	if out, err := down.CombinedOutput(); err != nil {
		t.Fatalf("sandbox down: %v\n%s", err, out)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d is still running after sandbox down", pid)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state directory %s left behind", state)
	}
}

func readPids(t *testing.T, state string) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(state, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	if len(out) < 5 {
		t.Fatalf("pids %v: want the supervisor and the control plane's four", out)
	}
	return out
}

// lookPath finds a program on a PATH value.
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
