package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// EnvBinDir names the environment variable that holds the directory of the
// control-plane binaries.
const EnvBinDir = "NODEWRIGHT_CONTROLPLANE_DIR"

// Options say which components to run.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler. Empty means $NODEWRIGHT_CONTROLPLANE_DIR.
	BinDir string
	// ControllerManager also runs kube-controller-manager with the workload,
	// garbage-collector, disruption (PDB), namespace and service-account
	// controllers, so Deployments create pods and PDBs allow evictions.
	ControllerManager bool
	// Scheduler also runs kube-scheduler.
	Scheduler bool
	// CRDs are installed, and waited for, before Start returns.
	CRDs [][]byte
	// Output receives every component's log as well as the per-component log
	// files in Dir; nil keeps logs in the files only.
	Output io.Writer
	// StartTimeout bounds the wait for each component; zero means one minute.
	StartTimeout time.Duration
	// KWOK is the path of the real kwok controller binary (hack/kwok.sh,
	// KWOKBinary); empty runs none. When set, Start runs it last, managing
	// the nodes annotated kwok.x-k8s.io/node=fake (those of Nodewright's
	// kwok provider) with the stages of kwok.yaml, and also runs
	// kube-controller-manager, adding its node-lifecycle controller, which
	// lifts the not-ready taint from nodes kwok reports Ready.
	KWOK string
	// ControllerManagerArgs and SchedulerArgs are appended to
	// kube-controller-manager's and kube-scheduler's flags (say,
	// --kube-api-qps for a benchmark at scale).
	ControllerManagerArgs, SchedulerArgs []string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config authenticates as a cluster admin (system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same admin.
	Kubeconfig string
	// Dir is the private temporary directory holding data, keys and logs.
	Dir string

	procs []*process
}

// Start runs the control plane described by opts. On error, whatever it had
// started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.BinDir == "" {
		opts.BinDir = os.Getenv(EnvBinDir)
	}
	if opts.BinDir == "" {
		return nil, fmt.Errorf("no control-plane binaries: set %s (make controlplane prints it)", EnvBinDir)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	dir, err := os.MkdirTemp("", "nodewright-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("creating control-plane directory: %w", err)
	}
	cp := &ControlPlane{Dir: dir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, cp.logTails())
			_ = cp.Stop()
		}
	}()

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	if err := cp.startEtcd(ctx, opts, etcdClient, etcdPeer); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, opts, etcdClient, apiPort); err != nil {
		return nil, err
	}
	if opts.ControllerManager || opts.KWOK != "" {
		if err := cp.startControllerManager(ctx, opts, kcmPort); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := cp.startScheduler(ctx, opts, schedPort); err != nil {
			return nil, err
		}
	}
	if len(opts.CRDs) > 0 {
		if err := InstallCRDs(ctx, cp.Config, opts.CRDs); err != nil {
			return nil, err
		}
	}
	if opts.KWOK != "" {
		if err := cp.startKWOK(ctx, opts, kwokPort); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// Stop ends every component (newest first) and removes the directory.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if err := cp.procs[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	cp.procs = nil
	if cp.Dir != "" {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", cp.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// Pids returns the process ids of the running components.
func (cp *ControlPlane) Pids() []int {
	pids := make([]int, 0, len(cp.procs))
	for _, p := range cp.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (cp *ControlPlane) start(name string, opts Options, args ...string) (*process, error) {
	return cp.startBinary(name, filepath.Join(opts.BinDir, name), opts, args, nil)
}

// startBinary starts bin as the component name and records it for Stop.
func (cp *ControlPlane) startBinary(name, bin string, opts Options, args, env []string) (*process, error) {
	p, err := startProcess(name, bin, cp.Dir, args, env, opts.Output)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, opts Options, client, peer int) error {
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p, err := cp.start("etcd", opts,
		"--name=default",
		"--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync=true", // test data: speed over durability
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, opts.StartTimeout, func() error {
		return httpGet(nil, clientURL+"/health")
	})
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, opts Options, etcdPort, port int) error {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return fmt.Errorf("generating serving certificate: %w", err)
	}
	saKey, saPub, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	token, err := randomToken()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"apiserver.crt": certPEM,
		"apiserver.key": keyPEM,
		"sa.key":        saKey,
		"sa.pub":        saPub,
		"tokens.csv":    []byte(token + `,admin,admin,"system:masters"` + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.Dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	in := func(name string) string { return filepath.Join(cp.Dir, name) }
	p, err := cp.start("kube-apiserver", opts,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // required with a loopback advertise address
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+in("certs"),
		"--tls-cert-file="+in("apiserver.crt"),
		"--tls-private-key-file="+in("apiserver.key"),
		"--token-auth-file="+in("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+in("sa.pub"),
		"--service-account-signing-key-file="+in("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24",
		// Pods in tests run on no kubelet; they need no token volume, and
		// without kube-controller-manager no default ServiceAccount exists.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
	)
	if err != nil {
		return err
	}
	cp.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		QPS:             200,
		Burst:           400,
	}
	if err := cp.writeKubeconfig(); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	return waitHealthy(ctx, p, opts.StartTimeout, func() error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

func (cp *ControlPlane) startControllerManager(ctx context.Context, opts Options, port int) error {
	controllers := "deployment-controller,replicaset-controller,statefulset-controller,job-controller,daemonset-controller,garbage-collector-controller,disruption-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller"
	if opts.KWOK != "" {
		// kwok reports nodes Ready; lifting the not-ready taint then is the
		// node lifecycle controller's part, as in a real cluster.
		controllers += ",node-lifecycle-controller"
	}
	args := append(cp.componentArgs("kube-controller-manager", port),
		"--controllers="+controllers,
		"--service-account-private-key-file="+filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file="+filepath.Join(cp.Dir, "apiserver.crt"),
		"--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
	)
	p, err := cp.start("kube-controller-manager", opts, append(args, opts.ControllerManagerArgs...)...)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, opts.StartTimeout, func() error {
		return httpGet(insecureLoopback, fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
	})
}

func (cp *ControlPlane) startScheduler(ctx context.Context, opts Options, port int) error {
	p, err := cp.start("kube-scheduler", opts, append(cp.componentArgs("kube-scheduler", port), opts.SchedulerArgs...)...)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, opts.StartTimeout, func() error {
		return httpGet(insecureLoopback, fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
	})
}

// componentArgs are the flags kube-controller-manager and kube-scheduler
// share: the admin kubeconfig for the API and for delegated auth, a loopback
// health port, and no leader election.
func (cp *ControlPlane) componentArgs(name string, port int) []string {
	return []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.Dir, name+"-certs"),
		"--leader-elect=false",
	}
}

func (cp *ControlPlane) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodewright-test"] = &clientcmdapi.Cluster{
		Server:                   cp.Config.Host,
		CertificateAuthorityData: cp.Config.CAData,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.Config.BearerToken}
	cfg.Contexts["nodewright-test"] = &clientcmdapi.Context{Cluster: "nodewright-test", AuthInfo: "admin"}
	cfg.CurrentContext = "nodewright-test"
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, cp.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// logTails returns the last lines of every component's log, for errors.
func (cp *ControlPlane) logTails() string {
	var b strings.Builder
	for _, p := range cp.procs {
		data, err := os.ReadFile(p.log.Name())
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", p.name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// waitHealthy polls check until it succeeds, the process exits, or timeout.
func waitHealthy(ctx context.Context, p *process, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited while starting: %v", p.name, err)
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s: %w", p.name, timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func serviceAccountKeys() (private, public []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// FindBinDir returns $NODEWRIGHT_CONTROLPLANE_DIR, or runs hack/controlplane.sh
// (found by walking up from the working directory) to build or locate the
// cached binaries. The first build takes about 15 minutes.
func FindBinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		script := filepath.Join(d, "hack", "controlplane.sh")
		if _, err := os.Stat(script); err == nil {
			cmd := exec.Command("bash", script)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return "", fmt.Errorf("running %s: %w", script, err)
			}
			return strings.TrimSpace(string(out)), nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("hack/controlplane.sh not found above %s; set %s", wd, EnvBinDir)
		}
	}
}
