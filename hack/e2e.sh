#!/usr/bin/env bash
# Runs the end-to-end tests (build tag "e2e") of the workspace in go.work (the
# library's module and the examples') against a real control plane: builds
# (or reuses the cached) etcd, kube-apiserver and kube-controller-manager with
# hack/controlplane/build.sh, exports their directory as
# HANDOFF_CONTROLPLANE_BIN, then runs
#
#   go test -race -tags e2e -count=1 -timeout 30m [extra go test flags] ${E2E_PKGS:-./... ./examples/...}
#
# Extra arguments are passed to go test before the packages (a later flag
# overrides an earlier one), e.g.
#   hack/e2e.sh -run TestControlPlane -v
# or, for the scale benchmark (e2e/scale_test.go) without the race detector:
#   E2E_PKGS=./e2e/ hack/e2e.sh -race=false -run '^$' -bench Scale -benchtime 1x -timeout 60m -v
# (HANDOFF_SCALE_SIZES=100 narrows it to the smallest component).
# Exits non-zero if the build or any test fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bindir="$(bash "$root/hack/controlplane/build.sh" | tail -n 1)"
if [ -z "$bindir" ] || [ ! -d "$bindir" ]; then
	echo "hack/e2e.sh: build.sh did not print a bin dir" >&2
	exit 1
fi
export HANDOFF_CONTROLPLANE_BIN="$bindir"
echo "hack/e2e.sh: HANDOFF_CONTROLPLANE_BIN=$HANDOFF_CONTROLPLANE_BIN" >&2

cd "$root"
# shellcheck disable=SC2086 # E2E_PKGS is a list of package patterns.
exec go test -race -tags e2e -count=1 -timeout 30m "$@" ${E2E_PKGS:-./... ./examples/...}
