#!/usr/bin/env bash
# check.sh [DIR]: lays the released versions (hack/release/versions) out as
# a module proxy in DIR (a temporary directory by default), then has the go
# command download each of them through it into an empty module cache,
# checking them against the go.sum lines the versions file records: the
# lines an importer's go.sum holds. Given DIR, it prints the GOPROXY value
# that serves them from there (file://DIR, then the usual proxy). A
# release whose zip or go.mod no longer hashes as recorded fails it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/handoff-release.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
if [ -z "$out" ]; then
	out="$scratch/proxy"
fi
mkdir -p "$out"
(cd "$here" && GOWORK=off GOFLAGS=-mod=readonly go run . -repo "$repo" -out "$out")

module=$(cd "$repo" && GOWORK=off go list -m)
mkdir -p "$scratch/importer"
cd "$scratch/importer"
printf 'module example.com/importer\n\ngo 1.22\n' >go.mod
: >go.sum
while read -r version commit ziphash modhash; do
	case "$version" in '' | '#'*) continue ;; esac
	echo "$module $version $ziphash" >>go.sum
	echo "$module $version/go.mod $modhash" >>go.sum
	GOWORK=off GOFLAGS=-mod=mod GOMODCACHE="$scratch/modcache" GOPROXY="file://$out,off" GONOSUMDB="$module" \
		go mod download "$module@$version"
	echo "   $module@$version: the go command's download matches the recorded go.sum lines"
done <"$here/versions"
if [ -n "${1:-}" ]; then
	echo "GOPROXY=file://$out,$(go env GOPROXY)"
fi
