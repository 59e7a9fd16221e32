// Command sandbox runs Nodewright on a laptop with no cloud and no
// containers: the test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler), Nodewright's CRDs, and
// `nodewright controller` with the kwok provider (its nodes are Node
// objects, its kubelet emulated), in one background process.
//
//	sandbox up   [--state DIR] [--cloud-provider kwok|aws] [--kwok builtin|real|auto]   start it; print the lines a user needs
//	sandbox down [--state DIR]                                                          stop all of it; nothing is left running
//
// With the kwok provider, --kwok says who plays its nodes' kubelet:
// Nodewright's own emulated kubelet (builtin), or the real kwok controller
// (sigs.k8s.io/kwok; real), which the control plane runs from
// $NODEWRIGHT_KWOK_BIN (`make kwok` builds it and prints its path) while
// Nodewright's kubelet is off, as users of Karpenter's kwok provider run it.
// The default, auto, is real when $NODEWRIGHT_KWOK_BIN is set and builtin
// otherwise.
//
// With --cloud-provider aws the AWS provider runs against the fake AWS
// (providers/aws/fake) on loopback, whose instances join the cluster, and
// the seed's manifests are what to apply. `make sandbox` and `make
// sandbox-down` run these with --state .sandbox (SANDBOX_PROVIDER=aws for
// the fake AWS).
//
// The state directory carries a marker file (.nodewright-sandbox): `up`
// and `down` delete only a directory holding it (`up` also takes a new or
// empty one), never the root, the home or current directory or a source
// tree. The pids file records each process's start time, boot and
// executable besides its pid, and `down` signals a pid only while all of
// them still match: a pid the kernel has since given to another process is
// left alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
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
	kwok := fs.String("kwok", kwokAuto, "who plays the kwok nodes' kubelet: builtin (Nodewright's), real (the kwok controller in $"+controlplane.EnvKWOKBin+"), or auto (real when that is set)")
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
		var mode string
		if mode, err = kwokMode(*kwok, *provider, controlplane.KWOKBinary()); err != nil {
			break
		}
		err = up(dir, *provider, mode)
	case "down":
		err = down(dir)
	case "serve":
		err = serve(dir, *provider, *kwok)
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
func up(dir, provider, kwok string) error {
	if err := refuseSpecial(dir); err != nil {
		return err
	}
	if pid, ok := running(dir); ok {
		return fmt.Errorf("a sandbox is already running (pid %d, state %s): run 'make sandbox-down' first", pid, dir)
	}
	if os.Getenv(controlplane.EnvBinDir) == "" {
		return fmt.Errorf("%s is not set: 'make sandbox' builds the control plane and sets it", controlplane.EnvBinDir)
	}
	if kwok == kwokReal {
		if err := checkKWOKBinary(controlplane.KWOKBinary()); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "sandbox: the real kwok (%s) plays the kwok nodes' kubelet\n", controlplane.KWOKBinary())
	}
	if err := prepareStateDir(dir); err != nil {
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
	cmd := exec.Command(self, "serve", "--state", dir, "--cloud-provider", provider, "--kwok", kwok)
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
	_ = cmd.Process.Signal(syscall.SIGTERM) // our own child, not yet reaped: its pid is still its own
	tail, _ := os.ReadFile(filepath.Join(dir, "sandbox.log"))
	return fmt.Errorf("the sandbox did not come up in 3 minutes; its log:\n%s", tail)
}

// serve is the background supervisor: control plane, CRDs, controller,
// until SIGTERM.
// sandboxCluster is the cluster name the fake AWS's resources are tagged
// for.
const sandboxCluster = "sandbox"

func serve(dir, provider, kwok string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Record this process first, so that `down` can stop a sandbox still
	// starting, then the control plane's processes as they come.
	self, err := record(os.Getpid())
	if err != nil {
		return err
	}
	if err := writeRecords(dir, []procRecord{self}); err != nil {
		return err
	}
	manifests, err := crds.Manifests()
	if err != nil {
		return err
	}
	opts := controlplane.Options{ControllerManager: true, Scheduler: true, CRDs: manifests}
	if kwok == kwokReal {
		opts.KWOK = controlplane.KWOKBinary()
	}
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	recs := []procRecord{self}
	for _, pid := range cp.Pids() {
		rec, err := record(pid)
		if err != nil {
			return fmt.Errorf("recording the control plane's processes: %w", err)
		}
		recs = append(recs, rec)
	}
	if err := writeRecords(dir, recs); err != nil {
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
		CloudProvider: "kwok", InstanceTypes: types, KWOKKubelet: kwok != kwokReal, RegistrationDelay: 2 * time.Second,
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
	return stopper{clock: clock.RealClock{}, grace: time.Minute, poll: 100 * time.Millisecond, out: os.Stdout}.down(dir)
}

// running reports the supervisor's pid when the state directory records
// one that is still running.
func running(dir string) (int, bool) {
	recs, err := readRecords(dir)
	if err != nil || len(recs) == 0 {
		return 0, false
	}
	if status, _, _ := check(recs[0]); status != procOurs {
		return 0, false
	}
	return recs[0].pid, true
}
