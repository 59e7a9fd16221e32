// Package controlplane runs a real Kubernetes control plane for integration
// tests: etcd and kube-apiserver, and on request kube-controller-manager and
// kube-scheduler, all on loopback with free ports, token authentication and a
// private temporary directory. It installs Nodewright's CRDs and hands tests a
// rest.Config. With Options.KWOK it also runs the real kwok controller
// (sigs.k8s.io/kwok, built by hack/kwok.sh; $NODEWRIGHT_KWOK_BIN) to play the
// kubelet of the nodes Nodewright's kwok provider creates, with the stages in
// kwok.yaml.
//
// The binaries come from hack/controlplane.sh (built once from the versions
// pinned in hack/go.mod and cached); their directory is passed in Options or in
// the NODEWRIGHT_CONTROLPLANE_DIR environment variable. Every process is
// started in its own process group with a parent-death signal, so none
// outlives the test binary, even when a test panics or times out.
//
// StartFaultProxy puts a seeded fault-injecting reverse proxy in front of the
// apiserver: clients given its kubeconfig see a share of their writes fail
// (500, 409 Conflict, or performed with the answer lost) while reads and
// watches pass through untouched.
package controlplane
