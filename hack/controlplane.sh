#!/usr/bin/env bash
# Builds (once) and prints the directory holding the control-plane binaries used by the
# integration tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl. They are compiled from the versions pinned in hack/go.mod (fetched through the
# Go module proxy only) and cached under the user's cache directory, keyed by those
# versions, so only the first run on a machine pays the ~15 minute build. Each binary is
# built on its own and moved into place when complete, so an interrupted build resumes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pin() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod"; }
k8s="$(pin k8s.io/kubernetes)"
etcd="$(pin go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s" || -z "$etcd" ]]; then
  echo "hack/go.mod must require k8s.io/kubernetes and go.etcd.io/etcd/server/v3" >&2
  exit 1
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/nodewright/controlplane/kubernetes-${k8s}_etcd-${etcd}"

declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
mkdir -p "$dir"
cd "$here"
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [[ -x "$dir/$name" ]] && continue
  echo "building $name ($k8s / etcd $etcd) into $dir; first run only" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/$name.partial" "${pkgs[$name]}" >&2
  mv "$dir/$name.partial" "$dir/$name"
done
echo "$dir"
