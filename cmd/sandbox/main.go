// Command sandbox runs Nodewright on a laptop with no cloud and no
// containers: the test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler), Nodewright's CRDs, and
// `nodewright controller` with the kwok provider (its nodes are Node
// objects, its kubelet emulated), in one background process.
//
//	sandbox up   [--state DIR] [--cloud-provider kwok|aws]   start it; print the lines a user needs
//	sandbox down [--state DIR]                               stop all of it; nothing is left running
//
// With --cloud-provider aws the AWS provider runs against the fake AWS
// (providers/aws/fake) on loopback, whose instances join the cluster, and
// the seed's manifests are what to apply. `make sandbox` and `make
// sandbox-down` run these with --state .sandbox (SANDBOX_PROVIDER=aws for
// the fake AWS).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodewright/nodewright/api/crds"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox up|down [--state DIR]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	state := fs.String("state", ".sandbox", "directory holding the sandbox's kubeconfig, pids and logs")
	provider := fs.String("cloud-provider", "kwok", "kwok, or aws (against the fake AWS)")
	_ = fs.Parse(os.Args[2:])
	dir, err := filepath.Abs(*state)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "up":
		if *provider != "kwok" && *provider != "aws" {
			err = fmt.Errorf("--cloud-provider %q: want kwok or aws", *provider)
			break
		}
		err = up(dir, *provider)
	case "down":
		err = down(dir)
	case "serve":
		err = serve(dir, *provider)
	default:
		err = fmt.Errorf("unknown command %q: want up or down", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sandbox:", err)
	os.Exit(1)
}

// up starts the supervisor in the background and waits until it is ready.
func up(dir, provider string) error {
	if pid, ok := running(dir); ok {
		return fmt.Errorf("a sandbox is already running (pid %d, state %s): run 'make sandbox-down' first", pid, dir)
	}
	if os.Getenv(controlplane.EnvBinDir) == "" {
		return fmt.Errorf("%s is not set: 'make sandbox' builds the control plane and sets it", controlplane.EnvBinDir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "sandbox.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(self, "serve", "--state", dir, "--cloud-provider", provider)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := filepath.Join(dir, "ready")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ready); err == nil {
			kubeconfig := filepath.Join(dir, "kubeconfig")
			fmt.Printf("export KUBECONFIG=%s PATH=%s:$PATH\n", kubeconfig, os.Getenv(controlplane.EnvBinDir))
			if provider == "aws" {
				fmt.Printf("for f in testdata/seed/ec2nodeclass-default.yaml testdata/seed/nodepool-default.yaml testdata/seed/nodepool-stable.yaml testdata/seed/deployment-web-api.yaml; do echo ---; sed 's/${CLUSTER_NAME}/%s/' \"$f\"; done | kubectl apply -f -\n", sandboxCluster)
			} else {
				fmt.Println("kubectl apply -f examples/quickstart/nodepool.yaml -f examples/quickstart/web.yaml")
			}
			return nil
		}
		select {
		case err := <-exited:
			tail, _ := os.ReadFile(filepath.Join(dir, "sandbox.log"))
			return fmt.Errorf("the sandbox stopped (%v); its log:\n%s", err, tail)
		case <-time.After(200 * time.Millisecond):
		}
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	tail, _ := os.ReadFile(filepath.Join(dir, "sandbox.log"))
	return fmt.Errorf("the sandbox did not come up in 3 minutes; its log:\n%s", tail)
}

// serve is the background supervisor: control plane, CRDs, controller,
// until SIGTERM.
// sandboxCluster is the cluster name the fake AWS's resources are tagged
// for.
const sandboxCluster = "sandbox"

func serve(dir, provider string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	manifests, err := crds.Manifests()
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, CRDs: manifests})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	pids := []string{strconv.Itoa(os.Getpid())}
	for _, p := range cp.Pids() {
		pids = append(pids, strconv.Itoa(p))
	}
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(strings.Join(pids, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	kubeconfig, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return err
	}
	types, err := catalog.Default()
	if err != nil {
		return err
	}
	conf := operator.Config{
		CloudProvider: "kwok", InstanceTypes: types, KWOKKubelet: true, RegistrationDelay: 2 * time.Second,
		BatchIdle: time.Second, BatchMax: 10 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
		MetricsAddr: "0", HealthAddr: "0", Logger: logger(),
	}
	done := make(chan error, 2)
	runners := 1
	if provider == "aws" {
		runners++
		// The fake AWS on loopback; its instances join the cluster.
		aws, err := fake.New(fake.Options{InstanceTypes: types, World: fake.DefaultWorld(sandboxCluster)})
		if err != nil {
			return err
		}
		endpoint := httptest.NewServer(aws)
		defer endpoint.Close()
		go func() { done <- aws.Join(ctx, cp.Config, 2*time.Second) }()
		conf.CloudProvider, conf.KWOKKubelet = "aws", false
		conf.AWS = operator.AWSConfig{SDK: fake.Config(endpoint.URL), ClusterName: sandboxCluster, InterruptionQueue: sandboxCluster}
	}
	go func() { done <- operator.Run(ctx, cp.Config, conf) }()
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		return err
	}
	// Until SIGTERM, or until a runner fails: then stop the others too.
	var first error
	select {
	case <-ctx.Done():
	case first = <-done:
		runners--
		stop()
	}
	for ; runners > 0; runners-- {
		if err := <-done; first == nil {
			first = err
		}
	}
	return first
}

func logger() logr.Logger { return zap.New(zap.UseDevMode(false)) }

// down stops the supervisor, which stops the rest, and checks nothing of
// the sandbox is left running.
func down(dir string) error {
	pid, ok := running(dir)
	if !ok {
		_ = os.RemoveAll(dir)
		fmt.Println("no sandbox is running")
		return nil
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "pids"))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for _, field := range strings.Fields(string(raw)) {
		p, err := strconv.Atoi(field)
		if err != nil {
			continue
		}
		for syscall.Kill(p, 0) == nil {
			if time.Now().After(deadline) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Println("sandbox stopped")
	return nil
}

// running reads the supervisor's pid and reports whether it is alive.
func running(dir string) (int, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}
