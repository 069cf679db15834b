#!/usr/bin/env bash
# Proves v0.80.0.patch with tektoncd/operator's own suites: takes
# tektoncd/operator v0.80.0 from the Go module proxy, applies the patch,
# requires this checkout of handoff in its place, and runs go vet over the
# packages the patch changes and go test over ./pkg/reconciler/... (56
# packages; the rest of v0.80.0's ./... is not run). It fails when a module
# version those packages build with moves, or when the README's Go excerpts
# are not the patched code, and prints the patch's diffstat and the
# InstallerSet suites' test counts.
#
# Usage: bash integrations/tektoncd-operator/run.sh [-keep] [-quick] | -prepare [-unpatched] | -series
#   -keep       leave the patched tree in place and print its path (e2e.sh
#               runs on it when HANDOFF_E2E_TREE names it)
#   -quick      leave out the unpatched run of the InstallerSet suites (its
#               only output is the counts before); CI's mode
#   -prepare    only prepare the tree (patched, handoff required), run no
#               check or test, and print its path as the last line (e2e.sh)
#   -unpatched  with -prepare: leave v0.80.0 as it is
#   -series     apply series/*.patch one commit at a time; each must vet
#               and pass the suites on its own
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=v0.80.0
patch="$here/$version.patch"
pkgs=./pkg/reconciler/...
suites='/pkg/reconciler/kubernetes/tektoninstallerset' # the InstallerSet suites: this package and those under it
series=("$here"/series/*.patch) # the same change as commits a maintainer reviews one by one
keep=false prepare=false unpatched=false byseries=false quick=false
for arg in "$@"; do
	case "$arg" in
	-keep) keep=true ;;
	-quick) quick=true ;;
	-prepare) prepare=true keep=true ;;
	-unpatched) unpatched=true ;;
	-series) byseries=true ;;
	*) echo "usage: run.sh [-keep] [-quick] | -prepare [-unpatched] | -series" >&2; exit 2 ;;
	esac
done
if $unpatched && ! $prepare; then echo "-unpatched goes with -prepare" >&2; exit 2; fi
if $byseries && $prepare; then echo "-series does not go with -prepare" >&2; exit 2; fi

# -trimpath: the build cache keys a package by module and version, not by
# the directory (or vendor/) it is built from. The
# caller's GOFLAGS (CI's -ldflags=-w) are kept; -mod is this script's.
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod -trimpath"
# A fixed directory, emptied first: the build cache keys packages by their
# directory, so a second run reuses the first one's builds.
work="${TMPDIR:-/tmp}/handoff-tektoncd-operator-$version"
cleanup() { [ -d "$work" ] && chmod -R u+w "$work" && rm -rf "$work"; return 0; }
cleanup
mkdir -p "$work"
$keep || trap cleanup EXIT

echo "== tektoncd/operator $version from the module proxy"
dir=$(cd "$work" && GOFLAGS= go mod download -json "github.com/tektoncd/operator@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$dir" ] || { echo "go mod download gave no source directory"; exit 1; }
src="$work/operator"
cp -R "$dir" "$src"
chmod -R u+w "$src"
cd "$src"

# modules prints the module (and replacement) of every package the
# reconcilers and their tests build with.
modules() {
	go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' $pkgs | sort -u
}

# counts reads verbose go test output and prints, over the InstallerSet
# suites' packages, "N tests, M subtests passed, F failed".
counts() {
	awk -v suites="$suites" '
		/^--- PASS/ { top++ }
		/^[ \t]+--- PASS/ { subs++ }
		/^[ \t]*--- FAIL/ { fail++ }
		/^(ok|FAIL)[ \t]+github\.com\// {
			if (index($2, suites) > 0) { T += top; S += subs; F += fail }
			top = 0; subs = 0; fail = 0
		}
		END { printf "%d tests, %d subtests passed, %d failed\n", T, S, F }'
}

# seriesfiles prints the files a list of patches touch, one a line.
seriesfiles() {
	for p in "$@"; do git apply --numstat "$p" | cut -f3; done | LC_ALL=C sort -u
}

# checkseries applies the series to a copy of the files the patch
# touches, as they are before it, and compares them with the patched
# tree: $1 is the tree before the patch (v0.80.0 in the module cache),
# $2 the tree after.
checkseries() {
	local before=$1 after=$2 scratch="$work/series-check" f
	if [ "$(seriesfiles "$patch")" != "$(seriesfiles "${series[@]}")" ]; then
		echo "the series touches other files than $(basename "$patch"):"
		diff <(seriesfiles "$patch") <(seriesfiles "${series[@]}") || true
		return 1
	fi
	rm -rf "$scratch"
	mkdir -p "$scratch"
	for f in $(seriesfiles "$patch"); do
		if [ -f "$before/$f" ]; then
			mkdir -p "$scratch/$(dirname "$f")"
			cp "$before/$f" "$scratch/$f"
		fi
	done
	(cd "$scratch" && for p in "${series[@]}"; do git apply "$p" || { echo "$(basename "$p") does not apply"; exit 1; }; done)
	for f in $(seriesfiles "$patch"); do
		if ! cmp -s "$scratch/$f" "$after/$f"; then
			echo "the series and $(basename "$patch") differ in $f:"
			diff -u "$after/$f" "$scratch/$f" | head -40 || true
			return 1
		fi
	done
	rm -rf "$scratch"
}

if $byseries; then
	# Each commit of the series builds and passes tektoncd/operator's
	# suites on its own, in order.
	go mod edit -require=github.com/kube-handoff/handoff@v0.0.0 -replace="github.com/kube-handoff/handoff=$repo"
	n=0
	for p in "${series[@]}"; do
		n=$((n + 1))
		began=$(date +%s)
		echo "== $n/${#series[@]} $(basename "$p")"
		git apply "$p"
		go vet $pkgs
		status=0
		go test -count=1 -v $pkgs >"$work/test.log" 2>&1 || status=$?
		echo "   packages: $(grep -c '^ok' "$work/test.log") ok, $(grep -c '^FAIL[[:space:]]' "$work/test.log" || true) failed; InstallerSet suites: $(counts <"$work/test.log"); $(($(date +%s) - began))s"
		if [ "$status" -ne 0 ]; then
			grep -B2 -A20 -E '^[[:space:]]*--- FAIL|^FAIL|^panic:' "$work/test.log" | head -200 || true
			exit "$status"
		fi
	done
	echo "== tektoncd/operator $version with the series, commit by commit: ok"
	exit 0
fi

if $prepare; then
	# The same tree, in the same directory (so the build cache is warm),
	# without the checks.
	if ! $unpatched; then
		git apply "$patch"
		go mod edit -require=github.com/kube-handoff/handoff@v0.0.0 -replace="github.com/kube-handoff/handoff=$repo"
	fi
	echo "$src"
	exit 0
fi

echo "== before the patch: modules, InstallerSet suites"
# The reconcilers build with pipelines-as-code v0.47.0 and tektoncd/pruner
# v0.4.0, which the module proxy does not serve: they must be in the
# module cache already.
modules >"$work/before.txt" || {
	echo "cannot list the reconcilers' modules: a module they need is neither in the module cache nor served"; exit 1
}
before="not run (-quick)"
if ! $quick; then
	before=$( (go test -count=1 -v "./${suites#/}/..." 2>&1 || true) | counts)
fi
echo "   $before"

echo "== the patch ($(basename "$patch"))"
git apply --stat "$patch"
git apply "$patch"
go mod edit -require=github.com/kube-handoff/handoff@v0.0.0 -replace="github.com/kube-handoff/handoff=$repo"

echo "== the series (series/*.patch, ${#series[@]} commits) is the patch"
checkseries "$dir" "$src"
echo "   applied in order, they give the patched files"

echo "== the README's Go excerpts are the patched code"
awk '/^```go$/ { f = 1; next } /^```$/ { f = 0 } f && NF' "$here/README.md" |
	sed 's/^[[:space:]]*//' | sort -u >"$work/excerpts.txt"
git apply --numstat "$patch" | cut -f3 | xargs cat | sed 's/^[[:space:]]*//' | sort -u >"$work/patched-lines.txt"
drift=$(comm -23 "$work/excerpts.txt" "$work/patched-lines.txt")
if [ -n "$drift" ]; then
	echo "README lines that are not in the files the patch changes:"; echo "$drift"; exit 1
fi
echo "   $(wc -l <"$work/excerpts.txt") distinct lines, all in the patched files"

echo "== module versions: requiring handoff may add only handoff"
modules >"$work/after.txt"
moved=$(diff "$work/before.txt" "$work/after.txt" | grep '^[<>]' | grep -v '^> github.com/kube-handoff/handoff ' || true)
if [ -n "$moved" ]; then
	echo "requiring handoff moves module versions tektoncd/operator builds with:"
	echo "$moved"
	exit 1
fi
echo "   $(wc -l <"$work/before.txt") modules before, unchanged; added: $(diff "$work/before.txt" "$work/after.txt" | grep '^>' | cut -c3- | sed "s|$repo|(this checkout)|")"

# The packages the patch changes: vet has nothing to say of the others'
# code, which is tekton's.
changed=$(git apply --numstat "$patch" | cut -f3 | grep '\.go$' | xargs -n1 dirname | sort -u | sed 's|^|./|')
echo "== go vet (the packages the patch changes: $(echo $changed))"
go vet $changed

echo "== go test -count=1 $pkgs"
status=0
go test -count=1 -v $pkgs >"$work/test.log" 2>&1 || status=$?
grep -E '^(ok|FAIL)[[:space:]]|^[[:space:]]*--- FAIL|^panic:' "$work/test.log" || true
after=$(counts <"$work/test.log")
echo "   packages: $(grep -c '^ok' "$work/test.log") ok, $(grep -c '^FAIL[[:space:]]' "$work/test.log" || true) failed, $(grep -c 'no test files' "$work/test.log" || true) without tests"
echo "== InstallerSet suites ($suites/...)"
echo "   before the patch: $before"
echo "   after the patch:  $after"
if [ "$status" -ne 0 ]; then
	grep -B2 -A20 -E '^[[:space:]]*--- FAIL' "$work/test.log" | head -200 || true
	exit "$status"
fi
$keep && echo "patched tree kept in $src"
echo "== tektoncd/operator $version with handoff: ok"
