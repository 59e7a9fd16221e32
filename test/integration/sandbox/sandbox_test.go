//go:build integration

// Package sandbox_test does what a new user of `make sandbox` would: start
// it, paste the lines it prints, scale, watch nodes come and go, stop it,
// and finds nothing left running.
package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// sandbox is a running sandbox and what `up` printed.
type sandbox struct {
	root, bin, state string
	// lines: the environment to export, then what to apply.
	lines []string
	pids  []int
	kube  client.Client
}

// start builds cmd/sandbox and runs `up` with a provider and a --kwok mode.
func start(t *testing.T, provider, kwok string) *sandbox {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{root: root, bin: filepath.Join(t.TempDir(), "sandbox"), state: filepath.Join(t.TempDir(), "state")}
	build := exec.Command("go", "build", "-o", s.bin, "./cmd/sandbox")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the sandbox: %v\n%s", err, out)
	}
	up := exec.Command(s.bin, "up", "--state", s.state, "--cloud-provider", provider, "--kwok", kwok)
	up.Dir = root
	out, err := up.Output()
	if err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(s.bin, "down", "--state", s.state).Run() })
	s.lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(s.lines) != 2 || !strings.HasPrefix(s.lines[0], "export KUBECONFIG=") {
		t.Fatalf("sandbox up printed:\n%s", out)
	}
	s.pids = readPids(t, s.state)
	restConfig, err := clientcmd.BuildConfigFromFlags("", strings.TrimPrefix(strings.Fields(s.lines[0])[1], "KUBECONFIG="))
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	crlog.SetLogger(logr.Discard()) // the client's own logs say nothing a test needs
	if s.kube, err = client.New(restConfig, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return s
}

// shell runs a script after the printed export line, in the repository,
// as a user's terminal would.
func (s *sandbox) shell(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", s.lines[0]+"\n"+script)
	cmd.Dir = s.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// poll waits for cond, showing the sandbox's log on failure.
func (s *sandbox) poll(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, cond); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.state, "sandbox.log"))
		t.Fatalf("%s: %v\nsandbox log tail:\n%s", what, err, tail(string(log), 40))
	}
}

// stop runs `down` and checks no process and no state are left.
func (s *sandbox) stop(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(s.bin, "down", "--state", s.state).CombinedOutput(); err != nil {
		t.Fatalf("sandbox down: %v\n%s", err, out)
	}
	for _, pid := range s.pids {
		if running(pid) {
			t.Errorf("process %d is still running after sandbox down", pid)
		}
	}
	if _, err := os.Stat(s.state); !os.IsNotExist(err) {
		t.Errorf("state directory %s left behind", s.state)
	}
}

// running reports whether pid is a live process. An exited process its
// parent has not reaped yet (a zombie; the sandbox's supervisor is
// reparented to init, which reaps in its own time) runs nothing, though
// kill(pid, 0) still finds it.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3, after the parenthesised command name (which may hold spaces).
	rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) == 0 || (fields[0] != "Z" && fields[0] != "X")
}

// running counts an app's Running pods whose node passes onNode.
func (s *sandbox) running(ctx context.Context, app string, onNode func(*corev1.Node) bool) (int, error) {
	var pods corev1.PodList
	if err := s.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		node := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			return 0, err
		}
		if onNode(node) {
			n++
		}
	}
	return n, nil
}

func managed(n *corev1.Node) bool { return n.Labels[karpv1.LabelNodePool] != "" }

func TestSandboxFromStartToStop(t *testing.T) {
	s := start(t, "kwok", "builtin")
	if !strings.HasPrefix(s.lines[1], "kubectl apply -f examples/") {
		t.Fatalf("the second line %q does not apply an example", s.lines[1])
	}
	s.shell(t, s.lines[1])
	s.shell(t, "kubectl scale deployment web --replicas=12")
	s.poll(t, "12 web pods running on Nodewright's nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := s.running(ctx, "web", managed)
		return n == 12, err
	})
	s.shell(t, "kubectl scale deployment web --replicas=0")
	s.poll(t, "every node removed once empty", 5*time.Minute, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := s.kube.List(ctx, &nodes, client.HasLabels{karpv1.LabelNodePool}); err != nil {
			return false, err
		}
		return len(nodes.Items) == 0, nil
	})
	s.stop(t)
}

// The sandbox with the fake AWS: the seed's manifests, applied as printed,
// put web-api's pods on the stable pool's fake-AWS nodes; then everything
// stops.
func TestSandboxWithTheFakeAWS(t *testing.T) {
	s := start(t, "aws", "builtin")
	s.shell(t, s.lines[1])
	s.poll(t, "web-api's 6 pods on the stable pool's fake-AWS nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := s.running(ctx, "web-api", func(node *corev1.Node) bool {
			return node.Labels[karpv1.LabelNodePool] == "stable" && strings.HasPrefix(node.Spec.ProviderID, "aws:///")
		})
		return n == 6, err
	})
	s.stop(t)
}

// The sandbox with the real kwok controller playing the kubelet: the
// quickstart's pods run on Nodewright's nodes, kwok is among the processes
// the sandbox records, and `down` stops it with the rest.
func TestSandboxWithTheRealKWOK(t *testing.T) {
	bin := controlplane.KWOKBinary()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set, and CI must run the sandbox with the real kwok: `make test-integration` sets it", controlplane.EnvKWOKBin)
		}
		t.Skipf("%s is not set: skipping the sandbox with the real kwok (`make kwok` builds it)", controlplane.EnvKWOKBin)
	}
	s := start(t, "kwok", "real")
	if !slices.ContainsFunc(s.pids, func(pid int) bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && exe == bin
	}) {
		t.Errorf("no process of the sandbox (%v) runs %s", s.pids, bin)
	}
	s.shell(t, s.lines[1])
	s.shell(t, "kubectl scale deployment web --replicas=4")
	s.poll(t, "4 web pods running on Nodewright's nodes, under the real kwok", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := s.running(ctx, "web", func(n *corev1.Node) bool {
			return managed(n) && n.Status.NodeInfo.KubeletVersion != "" && strings.HasPrefix(n.Status.NodeInfo.KubeletVersion, "kwok-")
		})
		return n == 4, err
	})
	s.stop(t)
}

func readPids(t *testing.T, state string) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(state, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	// One process a line: `PID start=TICKS boot=ID exe="PATH"`.
	var out []int
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		p, err := strconv.Atoi(fields[0])
		if err != nil {
			t.Fatalf("pids line %q: %v", line, err)
		}
		out = append(out, p)
	}
	if len(out) < 5 {
		t.Fatalf("pids %v: want the supervisor and the control plane's four", out)
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
