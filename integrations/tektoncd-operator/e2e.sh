#!/usr/bin/env bash
# Runs tektoncd/operator's own TektonPipeline, TektonTrigger and
# TektonInstallerSet reconcilers, patched with v0.80.0.patch, in process
# against a real control plane (etcd, kube-apiserver,
# kube-controller-manager): for a TektonPipeline a release upgrade, the same
# upgrade with the operator stopped after its k-th write and restarted, a
# rollback before the new release is Ready, a switch to a StatefulSet and
# back, a spec change, a target-namespace change and a removal; for a
# TektonTrigger a release upgrade, a target-namespace change and a removal;
# each on a control plane of its own. It prints a markdown table of what
# each did to the objects the component installs.
#
#  1. run.sh -prepare: v0.80.0 from the module proxy, patched, requiring
#     this checkout, in run.sh's fixed directory (warm build cache);
#  2. e2e/*.go.txt copied into it: three build-tagged (handoff_e2e) files
#     that construct the three reconcilers from clients, and the test
#     package pkg/reconciler/kubernetes/handoffe2e;
#  3. a KO_DATA_PATH: the operator's kodata (its proxy webhook) and, as
#     tekton-pipeline/<version>, the pipeline release's config/ from the
#     tektoncd/pipeline module v0.80.0 builds with (images resolved to
#     plain references, pipelines-info given the version), and as
#     tekton-trigger/<version> the triggers release's config/ (with its
#     interceptors) from the tektoncd/triggers module it builds with;
#  4. the control-plane binaries (hack/controlplane/build.sh: cached, or
#     built once, about 12 minutes on 2 cores) and
#     internal/controlplane/cmd/serve, which each test runs to start its
#     own control plane with the TektonInstallerSet, TektonPipeline,
#     TektonTrigger and TektonConfig CRDs from the operator's config/base;
#  5. go test -tags handoff_e2e ./pkg/reconciler/kubernetes/handoffe2e/.
#
# Usage: bash integrations/tektoncd-operator/e2e.sh [-unpatched] [go test flags]
#   -unpatched  the same scenarios on v0.80.0 as it is; the bounds the
#               patch promises are measured, not asserted
# HANDOFF_E2E_CRASH_POINTS (default 16) bounds the writes the interrupted
# upgrade is stopped after. HANDOFF_E2E_TREE, a patched tree run.sh -keep
# left (its build cache warm), is used as it is instead of making one with
# run.sh -prepare (patched only).
# Exits non-zero if a step fails or, patched, a bound does not hold.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
patched=true
if [ "${1:-}" = "-unpatched" ]; then
	patched=false
	shift
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

cp "$here/e2e/tektoninstallerset_export.go.txt" "$tree/pkg/reconciler/kubernetes/tektoninstallerset/zz_handoff_e2e.go"
cp "$here/e2e/tektonpipeline_export.go.txt" "$tree/pkg/reconciler/kubernetes/tektonpipeline/zz_handoff_e2e.go"
cp "$here/e2e/tektontrigger_export.go.txt" "$tree/pkg/reconciler/kubernetes/tektontrigger/zz_handoff_e2e.go"
mkdir -p "$tree/pkg/reconciler/kubernetes/handoffe2e"
for f in "$here"/e2e/*_test.go.txt; do
	cp "$f" "$tree/pkg/reconciler/kubernetes/handoffe2e/$(basename "${f%.txt}")"
done

echo "== KO_DATA_PATH"
kodata="$work/kodata"
rm -rf "$kodata"
mkdir -p "$kodata"
cp -R "$tree/cmd/kubernetes/operator/kodata/webhook" "$kodata/"
# release MODULE DIR [label]: the tektoncd/MODULE release's config/, as
# $kodata/DIR/<version>/, flattened, its images resolved to plain
# references and its version given (label: its release labels too).
release() {
	local mod=$1 dir=$2 m d v rel extra=()
	m=$(cd "$tree" && go list -m -f '{{.Dir}} {{.Version}}' "github.com/tektoncd/$mod")
	d=${m% *} v=${m#* }
	[ "${3:-}" = label ] && extra=(-e "s|release: \"devel\"|release: \"$v\"|")
	rel="$kodata/$dir/${v#v}"
	mkdir -p "$rel"
	(cd "$d/config" && find . -name '*.yaml' | LC_ALL=C sort) | while read -r f; do
		sed -e "s|ko://github.com/tektoncd/$mod/cmd/\([a-z0-9/-]*\)|ghcr.io/tektoncd/$mod/\1:$v|" \
			-e "s|version: \"devel\"|version: \"$v\"|" ${extra[@]+"${extra[@]}"} "$d/config/$f" >"$rel/$(echo "${f#./}" | tr / _)"
	done
	echo "   tektoncd/$mod $v: $(ls "$rel" | wc -l) files"
}
release pipeline tekton-pipeline
release triggers tekton-trigger label

echo "== control plane (serve; each test starts its own)"
bindir=$(bash "$repo/hack/controlplane/build.sh" | tail -n 1)
export HANDOFF_CONTROLPLANE_BIN="$bindir"
(cd "$repo" && GOFLAGS=-mod=readonly go build -o "$work/serve" ./internal/controlplane/cmd/serve)
crds=
for kind in installer_set pipeline trigger config; do
	crds="$crds${crds:+:}$tree/config/base/300-operator_v1alpha1_${kind}_crd.yaml"
done
echo "   $bindir"

echo "== go test -tags handoff_e2e ./pkg/reconciler/kubernetes/handoffe2e/"
table="$work/e2e-table.md"
rm -f "$table" "$work/e2e-operator.log"
status=0
(cd "$tree" && HANDOFF_E2E_SERVE="$work/serve" HANDOFF_E2E_CRDS="$crds" HANDOFF_E2E_PATCHED="$patched" \
	HANDOFF_E2E_LOG="$work/e2e-operator.log" HANDOFF_E2E_TABLE="$table" KO_DATA_PATH="$kodata" \
	SYSTEM_NAMESPACE=tekton-operator VERSION=v0.80.0 \
	go test -tags handoff_e2e -count=1 -timeout 30m -v "$@" ./pkg/reconciler/kubernetes/handoffe2e/) || status=$?
echo "(the table: $table; the reconcilers' log: $work/e2e-operator.log)"
exit "$status"
