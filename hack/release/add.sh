#!/usr/bin/env bash
# add.sh VERSION COMMIT appends a release to hack/release/versions, with
# the go.sum hashes of its zip and go.mod as the go command computes them
# from a proxy laid out from COMMIT (see docs/release.md).
set -euo pipefail
version=${1:?usage: add.sh VERSION COMMIT} commit=${2:?usage: add.sh VERSION COMMIT}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
commit=$(git -C "$repo" rev-parse --verify "$commit^{commit}")
if grep -q "^$version " "$here/versions" 2>/dev/null; then
	echo "add.sh: $version is already released" >&2
	exit 1
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/handoff-release.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
# Lay the release out with placeholder hashes (the run reports them wrong
# and writes everything all the same), then let the go command hash it.
echo "$version $commit h1:- h1:-" >"$scratch/versions"
(cd "$here" && GOWORK=off GOFLAGS=-mod=readonly go run . -repo "$repo" -out "$scratch/proxy" -versions "$scratch/versions") >/dev/null 2>&1 || true
module=$(cd "$repo" && GOWORK=off go list -m)
mkdir -p "$scratch/importer"
printf 'module example.com/importer\n\ngo 1.22\n' >"$scratch/importer/go.mod"
ev=$(echo "$version" | sed 's/[A-Z]/!\L&/g')
sums=$(cd "$scratch/importer" && GOWORK=off GOFLAGS=-mod=mod GOMODCACHE="$scratch/modcache" \
	GOPROXY="file://$scratch/proxy,off" GONOSUMDB="$module" go mod download -json "$module@$ev")
zip=$(echo "$sums" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p')
mod=$(echo "$sums" | sed -n 's/^\t"GoModSum": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$zip" ] && [ -n "$mod" ] || { echo "add.sh: no hashes from the go command: $sums" >&2; exit 1; }
echo "$version $commit $zip $mod" >>"$here/versions"
echo "added: $version $commit $zip $mod"
