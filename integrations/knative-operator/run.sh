#!/usr/bin/env bash
# Proves v0.42.2.patch with knative/operator's own suites, built as the pull
# request would be: takes knative.dev/operator v0.42.2 from the Go module
# proxy, stands a stub in for knative.dev/hack (the proxy does not serve the
# pseudo-version it requires; only hack/tools.go imports it), vendors it as
# knative does (go mod vendor: the tree, as knative's git holds it, with
# vendor/), applies the patch (its code, and go.mod and go.sum requiring the
# released library), serves that release from a module proxy laid out from
# this checkout (hack/release), vendors again, and runs go vet over the
# packages the patch changes and go test over ./pkg/reconciler/..., both
# -mod=vendor. It fails when a module version those packages build with
# moves (or one is added besides handoff), when the module graph (go list -m
# all) changes other than by handoff, when go.mod's go or toolchain line
# moves, when the vendored tree is not what go mod vendor makes, when a
# test fails, or when the patch does not apply; it prints the patch's
# diffstat and the counts before and after.
#
# Usage: bash integrations/knative-operator/run.sh [-keep] [-quick] [-current] [-pr DIR]
#        bash integrations/knative-operator/run.sh -prepare [-unpatched] [-current]
#   -keep       leave the patched tree in place and print its path (e2e.sh
#               runs on it when HANDOFF_E2E_TREE names it)
#   -quick      leave out the unpatched run of the suites (its only output
#               is the counts before); CI's mode
#   -current    this checkout of handoff in place of the release the patch
#               requires (a replace): the patch against the library as it
#               is now
#   -pr DIR     also write the pull request into DIR: the patched tree's
#               change to v0.42.2, vendor/ included, as git format-patch
#               makes it (git am applies it to knative's v0.42.2 tag)
#   -prepare    only make the tree (source, stub, vendor/, patch): no
#               tests, no module comparison; its path is the last line
#               printed (e2e.sh builds on it)
#   -unpatched  with -prepare: the tree as v0.42.2 is, the stub only
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=v0.42.2
patch="$here/$version.patch"
pkgs=./pkg/reconciler/...
lib=github.com/kube-handoff/handoff
keep=false prepare=false unpatched=false quick=false current=false pr=
usage="usage: run.sh [-keep] [-quick] [-current] [-pr DIR] | run.sh -prepare [-unpatched] [-current]"
while [ $# -gt 0 ]; do
	case "$1" in
	-keep) keep=true ;;
	-quick) quick=true ;;
	-current) current=true ;;
	-pr) pr=${2:?$usage}; shift ;;
	-prepare) prepare=true keep=true ;;
	-unpatched) unpatched=true ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift
done
[ -z "$pr" ] || pr=$(mkdir -p "$pr" && cd "$pr" && pwd)
if $unpatched && ! $prepare; then
	echo "run.sh: -unpatched goes with -prepare" >&2
	exit 2
fi

# -trimpath: the build cache keys a package by module and version, not by
# the directory (or vendor/) it is built from. The
# caller's GOFLAGS (CI's -ldflags=-w) are kept; -mod is this script's.
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod -trimpath"
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
printf 'module knative.dev/hack\n\ngo 1.18\n' >"$work/hackstub/go.mod"
printf '// Package hack stands in for knative.dev/hack, whose version the module\n// proxy does not serve.\npackage hack\n' >"$work/hackstub/hack.go"
go mod edit -replace="knative.dev/hack=$work/hackstub"

# The release of handoff the patch's go.mod requires, from a module proxy
# laid out from this checkout's recorded releases (the module is on no
# public proxy; docs/release.md). GONOSUMDB: the public checksum database
# does not know it either; go.sum's lines are checked all the same.
release=$(sed -n "s|^+[[:space:]]*$lib \(v[^[:space:]]*\)\$|\1|p" "$patch" | head -n 1)
[ -n "$release" ] || { echo "the patch's go.mod requires no release of $lib"; exit 1; }
GOPROXY=$(bash "$repo/hack/release/check.sh" "$work/proxy" | tail -n 1 | sed 's/^GOPROXY=//')
export GOPROXY GONOSUMDB=$lib

# vendor/ as knative's git tree holds it (the module zip has only
# modules.txt), made by knative's own command, and the tree a git
# repository, so that the patch's change, vendor/ included, is a commit.
go mod vendor
git init -q
git add -A
git -c user.name=knative -c user.email=knative@example.com commit -q -m "knative.dev/operator $version"

# patchit applies the patch, points the library at this checkout with
# -current, and vendors what the patched tree imports.
patchit() {
	git apply "$patch"
	if $current; then
		go mod edit -replace="$lib=$repo"
	fi
	go mod vendor
}

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
		patchit
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
	before=$( (go test -mod=vendor -count=1 -v $pkgs 2>&1 || true) | tee "$work/test-before.log" | counts)
fi
echo "   $before"

echo "== the patch ($(basename "$patch"))"
git apply --stat "$patch"
patchit
echo "   handoff: $(if $current; then echo "this checkout (-current), in place of $release"; else echo "$release, from the release proxy"; fi)"

echo "== the vendored tree: what go mod vendor makes, and every package it builds found in it"
go list -mod=vendor -deps -test ./... >/dev/null
git add -A
echo "   $(git diff --cached --stat -- vendor | tail -n 1) (vendor/)"
if [ -n "$pr" ]; then
	if $current; then echo "-pr goes without -current: the pull request requires the release" >&2; exit 2; fi
	git -c user.name="kube-handoff" -c user.email="maintainers@kube-handoff.dev" commit -q -F "$here/commit-message.txt"
	rm -f "$pr"/*.patch
	git format-patch -q -o "$pr" HEAD~1
	echo "   the pull request: $(ls "$pr")"
fi

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
echo "== go vet -mod=vendor (the packages the patch changes: $(echo $changed))"
go vet -mod=vendor $changed

echo "== go test -mod=vendor -count=1 $pkgs"
status=0
go test -mod=vendor -count=1 -v $pkgs >"$work/test.log" 2>&1 || status=$?
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
