#!/usr/bin/env bash
# Builds (once) and prints the path of the real kwok controller binary
# (sigs.k8s.io/kwok/cmd/kwok), which the kwok integration tests and
# `sandbox up --kwok=real` run in place of Nodewright's emulated kubelet. It is
# compiled from the version pinned in hack/kwok/go.mod (fetched through the Go
# module proxy only) and cached under the user's cache directory, keyed by that
# version, so only the first run on a machine pays the build (a few minutes).
# The binary is moved into place only when complete, so an interrupted build
# starts over cleanly.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(awk '$1 == "sigs.k8s.io/kwok" && $2 ~ /^v/ { print $2; exit }' "$here/kwok/go.mod")"
if [[ -z "$version" ]]; then
  echo "hack/kwok/go.mod must require sigs.k8s.io/kwok" >&2
  exit 1
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/nodewright/kwok/$version"
bin="$dir/kwok"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$dir"
  echo "building kwok $version into $dir; first run only" >&2
  (cd "$here/kwok" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.partial" sigs.k8s.io/kwok/cmd/kwok) >&2
  mv "$bin.partial" "$bin"
fi
echo "$bin"
