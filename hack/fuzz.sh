#!/usr/bin/env bash
# Runs one native Go fuzz target for a fixed time: hack/fuzz.sh PKG NAME FUZZTIME.
#
# Go 1.26's fuzz coordinator can report a bare "context deadline exceeded" when
# -fuzztime expires while a worker is mid-call (golang/go#75804, fixed in Go
# 1.27): no input failed and none is written. Such a run is not a finding, so
# it is told apart from one: a failure that wrote a reproducer, or printed
# anything but the bare deadline, fails; a bare deadline is followed by a
# deterministic replay of the target's corpus (seeds and testdata/fuzz), whose
# result decides.
set -euo pipefail
pkg="$1" name="$2" fuzztime="$3"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
  exit 0
fi
if grep -q 'Failing input written to' "$log" || ! grep -q '^    context deadline exceeded$' "$log"; then
  exit 1
fi
if [[ "$(grep -c -- '^--- FAIL' "$log")" != 1 ]] || grep -qE '^\s+(panic:|.*_test\.go:[0-9]+:)' "$log"; then
  exit 1
fi
echo "--- $name: the fuzz coordinator's deadline race (golang/go#75804), no failing input; replaying the corpus"
go test -count=1 -run "^${name}\$" "$pkg"
