#!/usr/bin/env bash
# Checks that knative.dev/operator v0.42.2 can require handoff without
# moving any module version it builds with. A library's go.mod raises its
# importers' versions to its own minimums, so this is the check that the
# library's minimums (go.mod: go 1.22, k8s.io v0.29.2, ...) are at or below
# knative's.
#
# It takes knative.dev/operator v0.42.2 from the Go module proxy, lists the
# modules (and versions) of every package that ./pkg/reconciler/... and its
# tests build with, and the whole module graph (go list -m all); then it
# requires this checkout of handoff (a replace), imports the library from
# pkg/reconciler/common and its test kit (handofftest) from that package's
# tests, lists both again and compares. Nothing but handoff itself may be
# added, and nothing may move; go.mod's go line must stay as it is and no
# toolchain line may appear. It then builds and vets pkg/reconciler/common
# with the library in it, at knative's versions.
#
# knative's go.mod requires knative.dev/hack at a pseudo-version the module
# proxy does not serve; no package of ./pkg/reconciler/... imports it, so a
# stub module stands in for it (a replace), before and after alike.
#
# Usage: bash integrations/knative-operator/versions.sh [handoff-dir]
#   handoff-dir  the handoff module to require (default: this checkout)
# Prints "moved: N" figures; exits non-zero if anything moves.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${1:-$here/../..}" && pwd)
version=v0.42.2
pkgs=./pkg/reconciler/...
importer=pkg/reconciler/common # the package that imports handoff
lib=github.com/kube-handoff/handoff

export GOWORK=off GOFLAGS=-mod=mod
work="${TMPDIR:-/tmp}/handoff-knative-operator-$version"
cleanup() { [ -d "$work" ] && chmod -R u+w "$work" && rm -rf "$work"; return 0; }
cleanup
mkdir -p "$work"
trap cleanup EXIT

echo "== knative.dev/operator $version from the module proxy"
dir=$(cd "$work" && GOFLAGS= go mod download -json "knative.dev/operator@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$dir" ] || { echo "go mod download gave no source directory"; exit 1; }
src="$work/operator"
cp -R "$dir" "$src"
chmod -R u+w "$src"
cd "$src"
mkdir hackstub
printf 'module knative.dev/hack\n\ngo 1.22\n' >hackstub/go.mod
go mod edit -replace=knative.dev/hack=./hackstub

# packages prints the module (and replacement) of every package the
# reconcilers and their tests build with; graph prints the module graph.
fmt='{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}'
packages() { go list -deps -test -f "{{with .Module}}$fmt{{end}}" $pkgs | sort -u; }
graph() { go list -m -f "$fmt" all | sort -u; }
# directives prints go.mod's go and toolchain lines.
directives() { grep -E '^(go|toolchain)[[:space:]]' go.mod || true; }

# compare prints, for two lists of "path version ...", one line per module
# that is not the same in both: "path: before -> after" ("(none)" for a
# module on one side only). Lines for handoff itself are left out.
compare() {
	awk -v lib="$lib" '
		{ p = $1; $1 = ""; v = substr($0, 2) }
		p == lib { next }
		FNR == NR { a[p] = v; next }
		{ b[p] = v }
		END {
			for (p in a) if (!(p in b)) print p ": " a[p] " -> (none)"
			for (p in b) if (!(p in a)) print p ": (none) -> " b[p]
			for (p in a) if ((p in b) && a[p] != b[p]) print p ": " a[p] " -> " b[p]
		}' "$1" "$2" | LC_ALL=C sort
}

echo "== before: the modules of $pkgs (with tests), the module graph"
packages >"$work/packages-before.txt"
graph >"$work/graph-before.txt"
directives >"$work/directives-before.txt"
echo "   $(wc -l <"$work/packages-before.txt") modules built, $(wc -l <"$work/graph-before.txt") in the graph; $(paste -sd' ' "$work/directives-before.txt")"

echo "== require $lib (handoff-dir: $(basename "$repo")), imported by $importer and its tests"
go mod edit -require="$lib@v0.0.0" -replace="$lib=$repo"
name=$(go list -f '{{.Name}}' "./$importer")
printf 'package %s\n\nimport _ "%s"\n' "$name" "$lib" >"$importer/zz_handoff_import.go"
printf 'package %s\n\nimport _ "%s/handofftest"\n' "$name" "$lib" >"$importer/zz_handoff_import_test.go"

echo "== after"
packages >"$work/packages-after.txt"
graph >"$work/graph-after.txt"
directives >"$work/directives-after.txt"
grep -q "^$lib " "$work/packages-after.txt" || { echo "handoff is not among the modules built: the import did not take"; exit 1; }

status=0
# report prints how many modules moved (another version), were added and
# were dropped, then the differences; any of them fails the check.
report() { # report WHAT BEFORE AFTER
	local diff moved added dropped
	diff=$(compare "$2" "$3")
	moved=$(printf '%s\n' "$diff" | grep -vc '(none)' || true)
	added=$(printf '%s\n' "$diff" | grep -c ': (none) ->' || true)
	dropped=$(printf '%s\n' "$diff" | grep -c -- '-> (none)$' || true)
	[ -n "$diff" ] || moved=0
	echo "   $1: moved: $moved, added: $added, dropped: $dropped"
	if [ -n "$diff" ]; then
		echo "$diff" | sed 's/^/     /'
		status=1
	fi
}
report "modules built by $pkgs (with tests)" "$work/packages-before.txt" "$work/packages-after.txt"
report "module graph (go list -m all)" "$work/graph-before.txt" "$work/graph-after.txt"
d0=$(paste -sd' ' "$work/directives-before.txt") d1=$(paste -sd' ' "$work/directives-after.txt")
if [ "$d0" = "$d1" ]; then
	echo "   go.mod's go and toolchain lines: moved: 0 ($d1)"
else
	echo "   go.mod's go and toolchain lines: moved: 1 ($d0 -> $d1)"
	status=1
fi
[ "$status" -eq 0 ] || { echo "requiring handoff moves knative.dev/operator $version's versions"; exit 1; }

echo "== go build, go vet ./$importer (handoff at knative's versions)"
go build "./$importer"
go vet "./$importer"
echo "== knative.dev/operator $version with handoff: moved: 0"
