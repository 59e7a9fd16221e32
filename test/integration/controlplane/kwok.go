package controlplane

import (
	"context"
	_ "embed" // kwok.yaml
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// EnvKWOKBin names the environment variable that holds the path of the real
// kwok controller binary (hack/kwok.sh prints it; `make test-integration`
// sets it).
const EnvKWOKBin = "NODEWRIGHT_KWOK_BIN"

// KWOKNodeSelector is the annotation selector of the nodes the real kwok
// manages: those Nodewright's kwok provider creates, as with Karpenter's.
const KWOKNodeSelector = "kwok.x-k8s.io/node=fake"

// KWOKBinary returns the path of the real kwok binary from
// $NODEWRIGHT_KWOK_BIN, or "" when it is unset.
func KWOKBinary() string { return os.Getenv(EnvKWOKBin) }

// kwokConfig holds kwok's options and the stages it plays; see kwok.yaml.
//
//go:embed kwok.yaml
var kwokConfig []byte

// KWOKConfig returns the configuration Start gives kwok (--config): its
// parallelism options and the stages that make nodes Ready, bound pods
// Running and deleted pods go away, all without delay.
func KWOKConfig() []byte { return append([]byte(nil), kwokConfig...) }

// KWOKArgs returns the flags Start runs kwok with: the admin kubeconfig, the
// configuration file, the nodes to manage, node leases, a loopback port for
// its server (health checks), and the pod and node addresses it hands out.
func KWOKArgs(kubeconfig, config string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KWOKNodeSelector,
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--cidr=10.128.0.0/16", // pod IPs: room for 65k pods
		"--node-ip=10.127.0.1",
	}
}

// startKWOK runs the real kwok controller against the API server and waits
// until its server answers, which it does once its controllers run. Its work
// directory is private, so a ~/.kwok/kwok.yaml of the user's is not read.
func (cp *ControlPlane) startKWOK(ctx context.Context, opts Options, port int) error {
	work := filepath.Join(cp.Dir, "kwok")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return fmt.Errorf("creating kwok's work directory: %w", err)
	}
	config := filepath.Join(cp.Dir, "kwok.yaml")
	if err := os.WriteFile(config, kwokConfig, 0o600); err != nil {
		return fmt.Errorf("writing kwok's configuration %s: %w", config, err)
	}
	p, err := cp.startBinary("kwok", opts.KWOK, opts, KWOKArgs(cp.Kubeconfig, config, port), []string{"KWOK_WORKDIR=" + work})
	if err != nil {
		return err
	}
	return waitHealthy(ctx, p, opts.StartTimeout, func() error {
		return httpGet(nil, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	})
}
