#!/usr/bin/env bash
# Runs knative/operator's own KnativeServing and KnativeEventing
# reconcilers, patched with v0.42.2.patch (or not: -unpatched), in process
# against a real control plane (etcd, kube-apiserver,
# kube-controller-manager), through the releases the operator ships, and
# prints a markdown table of what each upgrade and the removal did to the
# objects only the previous release listed.
#
#  1. run.sh -prepare: v0.42.2 from the module proxy, the knative.dev/hack
#     stub, vendored, patched (requiring the release of handoff the patch
#     names, from this checkout's release proxy) or not, in run.sh's fixed
#     directory (warm build cache);
#  2. e2e/*.go.txt copied into it: build-tagged (handoff_e2e) files that
#     construct the two reconcilers from clients (the *_patched ones only
#     into the patched tree) and the test package
#     pkg/reconciler/handoffe2e, compiled once (go test -c);
#  3. per test, a fresh control plane from internal/controlplane/cmd/serve
#     with the operator's KnativeServing and KnativeEventing CRDs
#     (config/crd/bases), KO_DATA_PATH the operator's cmd/operator/kodata,
#     and the RBAC of the operator's release (its Helm chart's template),
#     under which the operator runs as the ServiceAccount knative-operator
#     (HANDOFF_E2E_ADMIN=1: as cluster-admin instead); the control plane
#     is killed after the test.
#
# Usage: bash integrations/knative-operator/e2e.sh [-unpatched] [go test flags]
#   -unpatched  the same scenarios on v0.42.2 as it is; the bounds the
#               patch promises are measured, not asserted
# Environment: HANDOFF_E2E_READY_DELAY (default 5s) and
# HANDOFF_E2E_SLOW_DELAY (default 30s), how long after its creation a pod
# turns Ready, normally and in the slow-start scenario; HANDOFF_E2E_TESTS,
# the tests to run (space-separated; default all of them);
# HANDOFF_E2E_PARALLEL, how many at a time (default 2); HANDOFF_E2E_TREE,
# a patched tree run.sh -keep left (its build cache warm), used as it is
# instead of making one with run.sh -prepare (patched only);
# HANDOFF_E2E_ADMIN=1, the operator as cluster-admin, not under its RBAC.
# Exits non-zero if a step fails or, patched, a bound does not hold.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
patched=true
if [ "${1:-}" = "-unpatched" ]; then
	patched=false
	shift
fi
# Longest first: they run HANDOFF_E2E_PARALLEL at a time.
tests=(TestServingUpgradeInterrupted TestServingUpgradeAndRemoval TestEventingSlowStart TestEventingUpgrade
	TestServingSlowStart TestServingOperatorUpgrade TestServingOperatorUpgradeUnfetchable TestServingUnfetchable)
# HANDOFF_E2E_TESTS, if set, runs only the tests it names (space-separated).
if [ -n "${HANDOFF_E2E_TESTS:-}" ]; then
	read -r -a tests <<<"$HANDOFF_E2E_TESTS"
fi

# -trimpath: the build cache keys a package by module and version, not by
# the directory (or vendor/) it is built from. The
# caller's GOFLAGS (CI's -ldflags=-w) are kept; -mod is this script's.
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod -trimpath"

if [ -n "${HANDOFF_E2E_TREE:-}" ]; then
	$patched || { echo "HANDOFF_E2E_TREE is a patched tree: not with -unpatched" >&2; exit 2; }
	echo "== the operator tree (HANDOFF_E2E_TREE, left by run.sh -keep)"
	tree=$HANDOFF_E2E_TREE
elif $patched; then
	echo "== the operator tree (run.sh -prepare)"
	tree=$(bash "$here/run.sh" -prepare | tail -n 1)
else
	echo "== the operator tree (run.sh -prepare -unpatched)"
	tree=$(bash "$here/run.sh" -prepare -unpatched | tail -n 1)
fi
[ -d "$tree/pkg" ] || { echo "run.sh -prepare gave no tree"; exit 1; }
work=$(dirname "$tree")
echo "   $tree"

for c in knativeserving knativeeventing; do
	cp "$here/e2e/${c}_export.go.txt" "$tree/pkg/reconciler/$c/zz_handoff_e2e.go"
	if $patched; then
		cp "$here/e2e/${c}_export_patched.go.txt" "$tree/pkg/reconciler/$c/zz_handoff_e2e_patched.go"
	fi
done
mkdir -p "$tree/pkg/reconciler/handoffe2e"
for f in "$here"/e2e/*_test.go.txt; do
	cp "$f" "$tree/pkg/reconciler/handoffe2e/$(basename "${f%.txt}")"
done

# Built -mod=vendor, as run.sh builds the suites (one build of the tree):
# vendored again first, for what the test package imports besides.
echo "== go test -c -mod=vendor -tags handoff_e2e ./pkg/reconciler/handoffe2e/"
(cd "$tree" && go mod vendor && go vet -mod=vendor -tags handoff_e2e ./pkg/reconciler/handoffe2e/ &&
	go test -c -mod=vendor -tags handoff_e2e -o "$work/handoffe2e.test" ./pkg/reconciler/handoffe2e/)

echo "== control plane binaries"
bindir=$(bash "$repo/hack/controlplane/build.sh" | tail -n 1)
export HANDOFF_CONTROLPLANE_BIN="$bindir"
(cd "$repo" && go build -o "$work/serve" ./internal/controlplane/cmd/serve)

table="$work/e2e-table.md"
log="$work/e2e-operator.log"
rm -f "$table" "$table.notes" "$log"

# run_test T starts a control plane of its own for test T, runs T against
# it and stops it; it prints the test's output and returns its status.
run_test() {
	local t=$1 kubeconfig="$work/kubeconfig-$1" serve rc=0 began
	rm -f "$kubeconfig"
	"$work/serve" -kubeconfig "$kubeconfig" -crds "$tree/config/crd/bases" 2>"$work/serve-$t.log" &
	serve=$!
	for _ in $(seq 360); do
		[ -f "$kubeconfig" ] && break
		kill -0 "$serve" 2>/dev/null || { cat "$work/serve-$t.log"; return 1; }
		sleep 0.5
	done
	if [ ! -f "$kubeconfig" ]; then
		echo "the control plane did not start"
		cat "$work/serve-$t.log"
		kill "$serve" 2>/dev/null
		wait "$serve" 2>/dev/null
		return 1
	fi
	began=$(date +%s)
	(cd "$tree/pkg/reconciler/handoffe2e" && HANDOFF_E2E_KUBECONFIG="$kubeconfig" HANDOFF_E2E_PATCHED="$patched" \
		HANDOFF_E2E_LOG="$log" HANDOFF_E2E_TABLE="$table" KO_DATA_PATH="$tree/cmd/operator/kodata" \
		HANDOFF_E2E_RBAC="$rbac" \
		SYSTEM_NAMESPACE=knative-operator \
		"$work/handoffe2e.test" -test.run "^$t\$" -test.count=1 -test.timeout 20m -test.v "$@") >"$work/test-$t.log" 2>&1 || rc=$?
	kill "$serve" 2>/dev/null
	wait "$serve" 2>/dev/null
	echo "== $t ($(tail -n 1 "$work/serve-$t.log" | sed -n 's/.* up in \([0-9.]*s\).*/control plane up in \1; /p')test $(($(date +%s) - began)) s)"
	grep -E '^(--- |PASS|FAIL|panic)|_test.go:[0-9]+:|^[[:space:]]+' "$work/test-$t.log" | head -100 || true
	return "$rc"
}

# The operator's RBAC as its release ships it, unless HANDOFF_E2E_ADMIN=1.
rbac=$tree/config/charts/knative-operator/templates/operator.yaml
if [ "${HANDOFF_E2E_ADMIN:-}" = 1 ]; then
	rbac=
fi

# The tests run $HANDOFF_E2E_PARALLEL at a time (default 2), each on its
# own control plane: the operator's clients are rate-limited (QPS 10), so
# the tests mostly wait.
parallel=${HANDOFF_E2E_PARALLEL:-2}
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for t in "${tests[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do
		wait -n || true
	done
	rm -f "$work/rc-$t"
	(
		rc=0
		run_test "$t" "$@" >"$work/out-$t.txt" 2>&1 || rc=$?
		echo "$rc" >"$work/rc-$t"
	) &
	pids+=($!)
done
wait || true
status=0
for t in "${tests[@]}"; do
	[ "$(cat "$work/rc-$t" 2>/dev/null || echo 1)" = 0 ] || status=1
done
for t in "${tests[@]}"; do
	cat "$work/out-$t.txt"
done

echo
if $patched; then
	echo "knative.dev/operator v0.42.2 + v0.42.2.patch on a real control plane"
else
	echo "knative.dev/operator v0.42.2 (unpatched) on a real control plane"
fi
echo
echo "| scenario | obsolete objects | deleted before rollout | by up to | rollout done after | lingering after convergence | of them old Jobs | foreign/kept deleted | API calls / steady reconcile | time |"
echo "|---|---|---|---|---|---|---|---|---|---|"
[ -f "$table" ] && LC_ALL=C sort -s -t '|' -k2,2 "$table"
echo
[ -f "$table.notes" ] && LC_ALL=C sort -s -t : -k1,1 "$table.notes"
echo "(the reconcilers' log: $log)"
exit "$status"
