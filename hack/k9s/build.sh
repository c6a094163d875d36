#!/usr/bin/env bash
# Builds the k9s that ../../plugins.yaml is written for (the version pinned in this folder's
# go.mod) into a cache folder outside the repository, keyed by version, and prints the binary's
# path. When the binary is already there it builds nothing.
#
#   hack/k9s/build.sh          build if needed, print the path of k9s
#   hack/k9s/build.sh --path   only print the path it builds to (whether it exists or not)
#   GOBRAVE_K9S=PATH           use PATH instead (printed as is, nothing built)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
version=$(go list -m -f '{{.Version}}' github.com/derailed/k9s)
[ -n "$version" ] || { echo "k9s-build: no github.com/derailed/k9s in $here/go.mod" >&2; exit 1; }

if [ -n "${GOBRAVE_K9S:-}" ]; then
  [ "${1:-}" = --path ] || [ -x "$GOBRAVE_K9S" ] || { echo "k9s-build: GOBRAVE_K9S=$GOBRAVE_K9S is not executable" >&2; exit 1; }
  echo "$GOBRAVE_K9S"
  exit 0
fi

dir=${XDG_CACHE_HOME:-$HOME/.cache}/gobrave-testbin/k9s-$version
bin=$dir/k9s
if [ "${1:-}" = --path ] || [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

log() { echo "k9s-build: $*" >&2; }
log "building k9s $version into $dir (a cold build takes several minutes on 2 cores)"
mkdir -p "$dir"
start=$(date +%s)
# Same stamping as k9s's own Makefile, so `k9s version` reports the real version.
ldflags="-s -w -X github.com/derailed/k9s/cmd.version=$version -X github.com/derailed/k9s/cmd.commit=gobrave-hack-k9s"
# A temp name in the same folder, renamed at the end: an interrupted build leaves no half binary,
# and two builds at once both end with a complete file.
tmp=$(mktemp "$dir/k9s.XXXXXX")
trap 'rm -f "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" github.com/derailed/k9s
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
log "built in $(( $(date +%s) - start ))s"
echo "$bin"
