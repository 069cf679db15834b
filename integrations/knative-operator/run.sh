#!/usr/bin/env bash
# Proves v0.42.2.patch with knative/operator's own suites: takes
# knative.dev/operator v0.42.2 from the Go module proxy, stands a stub in for
# knative.dev/hack (the proxy does not serve the pseudo-version it requires;
# no package under ./pkg/reconciler/... imports it), runs the reconciler
# suites unpatched for the test counts before, applies the patch, requires
# this checkout of handoff in its place, and runs go vet over the packages
# the patch changes and go test over ./pkg/reconciler/.... It fails when a
# module version those packages build with moves (or one is added besides
# handoff), when the module graph (go list -m all) changes other than by
# handoff, when go.mod's go or toolchain line moves, when a test fails, or
# when the patch does not apply; it prints the patch's diffstat and the
# counts before and after.
#
# Usage: bash integrations/knative-operator/run.sh [-keep] [-quick]
#        bash integrations/knative-operator/run.sh -prepare [-unpatched]
#   -keep       leave the patched tree in place and print its path (e2e.sh
#               runs on it when HANDOFF_E2E_TREE names it)
#   -quick      leave out the unpatched run of the suites (its only output
#               is the counts before); CI's mode
#   -prepare    only make the tree (source, stub, patch, this checkout
#               required): no tests, no module comparison; its path is the
#               last line printed (e2e.sh builds on it)
#   -unpatched  with -prepare: the tree as v0.42.2 is, the stub only
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=v0.42.2
patch="$here/$version.patch"
pkgs=./pkg/reconciler/...
lib=github.com/kube-handoff/handoff
keep=false prepare=false unpatched=false quick=false
for arg in "$@"; do
	case "$arg" in
	-keep) keep=true ;;
	-quick) quick=true ;;
	-prepare) prepare=true keep=true ;;
	-unpatched) unpatched=true ;;
	*) echo "usage: run.sh [-keep] [-quick] | run.sh -prepare [-unpatched]" >&2; exit 2 ;;
	esac
done
if $unpatched && ! $prepare; then
	echo "run.sh: -unpatched goes with -prepare" >&2
	exit 2
fi

export GOWORK=off GOFLAGS=-mod=mod
# A fixed directory, emptied first: the build cache keys packages by their
# directory, so a second run reuses the first one's builds.
work="${TMPDIR:-/tmp}/handoff-knative-operator-$version"
cleanup() { [ -d "$work" ] && chmod -R u+w "$work" && rm -rf "$work"; return 0; }
cleanup
mkdir -p "$work"
$keep || trap cleanup EXIT

echo "== knative.dev/operator $version from the module proxy"
dir=$(cd "$work" && GOFLAGS= go mod download -json "knative.dev/operator@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$dir" ] || { echo "go mod download gave no source directory"; exit 1; }
src="$work/operator"
cp -R "$dir" "$src"
chmod -R u+w "$src"
cd "$src"
mkdir "$work/hackstub"
printf 'module knative.dev/hack\n\ngo 1.22\n' >"$work/hackstub/go.mod"
go mod edit -replace="knative.dev/hack=$work/hackstub"

# modules prints the module (and replacement) of every package the
# reconcilers and their tests build with; directives go.mod's go and
# toolchain lines.
modules() {
	go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' $pkgs | sort -u
}
directives() { grep -E '^(go|toolchain)[[:space:]]' go.mod || true; }
# graph prints the module graph, handoff left out.
graph() {
	go list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}' all | grep -v "^$lib " | sort -u
}

# counts reads verbose go test output and prints "N tests, M subtests
# passed, F failed" over every package.
counts() {
	awk '
		/^--- PASS/ { top++ }
		/^[ \t]+--- PASS/ { subs++ }
		/^[ \t]*--- FAIL/ { fail++ }
		END { printf "%d tests, %d subtests passed, %d failed\n", top, subs, fail }'
}

if $prepare; then
	if ! $unpatched; then
		git apply "$patch"
		go mod edit -require="$lib@v0.0.0" -replace="$lib=$repo"
	fi
	echo "$src"
	exit 0
fi

echo "== before the patch: modules, module graph$($quick || echo ", $pkgs")"
modules >"$work/before.txt"
graph >"$work/graph-before.txt"
directives >"$work/directives-before.txt"
before="not run (-quick)"
if ! $quick; then
	before=$( (go test -count=1 -v $pkgs 2>&1 || true) | tee "$work/test-before.log" | counts)
fi
echo "   $before"

echo "== the patch ($(basename "$patch"))"
git apply --stat "$patch"
git apply "$patch"
go mod edit -require="$lib@v0.0.0" -replace="$lib=$repo"

echo "== module versions: requiring handoff may add only handoff"
modules >"$work/after.txt"
directives >"$work/directives-after.txt"
grep -q "^$lib " "$work/after.txt" || { echo "handoff is not among the modules built: the patch does not import it"; exit 1; }
moved=$(diff "$work/before.txt" "$work/after.txt" | grep '^[<>]' | grep -v "^> $lib " || true)
if [ -n "$moved" ]; then
	echo "requiring handoff moves module versions knative.dev/operator builds with:"
	echo "$moved"
	exit 1
fi
if ! cmp -s "$work/directives-before.txt" "$work/directives-after.txt"; then
	echo "go.mod's go or toolchain line moved: $(paste -sd' ' "$work/directives-before.txt") -> $(paste -sd' ' "$work/directives-after.txt")"
	exit 1
fi
echo "   $(wc -l <"$work/before.txt") modules before, unchanged (moved: 0); $(paste -sd' ' "$work/directives-after.txt"); added: $(diff "$work/before.txt" "$work/after.txt" | grep '^>' | cut -c3- | sed "s|$repo|(this checkout)|")"
graph >"$work/graph-after.txt"
moved=$(diff "$work/graph-before.txt" "$work/graph-after.txt" | grep '^[<>]' || true)
if [ -n "$moved" ]; then
	echo "requiring handoff changes knative.dev/operator's module graph (go list -m all):"
	echo "$moved"
	exit 1
fi
echo "   module graph: $(wc -l <"$work/graph-before.txt") modules besides handoff, unchanged (moved: 0)"

# The packages the patch changes: vet has nothing to say of the others'
# code, which is knative's.
changed=$(git apply --numstat "$patch" | cut -f3 | grep '\.go$' | xargs -n1 dirname | sort -u | sed 's|^|./|')
echo "== go vet (the packages the patch changes: $(echo $changed))"
go vet $changed

echo "== go test -count=1 $pkgs"
status=0
go test -count=1 -v $pkgs >"$work/test.log" 2>&1 || status=$?
grep -E '^(ok|FAIL)[[:space:]]|^[[:space:]]*--- FAIL|^panic:' "$work/test.log" || true
after=$(counts <"$work/test.log")
echo "   packages: $(grep -c '^ok' "$work/test.log") ok, $(grep -c '^FAIL[[:space:]]' "$work/test.log" || true) failed, $(grep -c 'no test files' "$work/test.log" || true) without tests"
grep -E 'API calls of a steady reconcile' "$work/test.log" | sed 's/^[[:space:]]*/   /' || true
echo "== $pkgs"
echo "   before the patch: $before"
echo "   after the patch:  $after"
if [ "$status" -ne 0 ]; then
	grep -B2 -A30 -E '^[[:space:]]*--- FAIL' "$work/test.log" | head -200 || true
	exit "$status"
fi
$keep && echo "patched tree kept in $src"
echo "== knative.dev/operator $version with handoff: ok"
