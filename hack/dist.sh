#!/usr/bin/env bash
# Release archives and the krew manifest (`make dist`).
#
# Builds kubectl-gobrave for linux, darwin and windows x amd64, arm64 with
# CGO_ENABLED=0, -trimpath, -buildvcs=false and the Makefile's version ldflags,
# packs each with LICENSE (and hack/completion/kubectl_complete-gobrave when it
# exists) into dist/kubectl-gobrave_<version>_<os>_<arch>.tar.gz (.zip for
# windows), then renders hack/krew/gobrave.yaml.tmpl into krew-manifest.yaml
# with each archive's sha256. The same sources, VERSION, COMMIT and Go version
# give byte-identical archives, so the committed manifest's sha256 values can
# be checked (hack/test-dist.sh does).
#
#   VERSION=v1.2.3   krew needs a semver version: default `git describe --tags`
#                    when HEAD is exactly a semver tag, else v0.1.0
#   COMMIT=abc1234   default: the last commit that changed what goes into the
#                    archives (cmd pkg go.mod go.sum LICENSE hack/completion),
#                    with -dirty when those have uncommitted changes. Not HEAD:
#                    committing the manifest itself must not change the binaries
#                    it describes.
#   SOURCE_DATE_EPOCH  modification time inside the archives (default: that
#                    commit's time)
#   PLATFORMS="linux/amd64 ..."  a subset (the manifest needs all six, so it is
#                    written only when MANIFEST is set explicitly)
#   DIST_DIR=dist    MANIFEST=krew-manifest.yaml (empty: do not write one)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { echo "dist: $*" >&2; }

all_platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
inputs=(cmd pkg go.mod go.sum LICENSE hack/completion)

if [ -z "${VERSION:-}" ]; then
  VERSION=v0.1.0
  tag=$(git describe --tags 2>/dev/null || true)
  # v1.2.3-4-gabcdef is describe's "4 commits after v1.2.3", not a release.
  if [[ $tag =~ $semver ]] && ! [[ $tag =~ -[0-9]+-g[0-9a-f]+$ ]]; then VERSION=$tag; fi
fi
[[ $VERSION =~ $semver ]] || { log "VERSION=$VERSION is not a semver version like v1.2.3 (krew requires one)"; exit 2; }

if git rev-parse --git-dir >/dev/null 2>&1; then
  if [ -z "${COMMIT:-}" ]; then
    COMMIT=$(git log -1 --format=%h -- "${inputs[@]}")
    # GIT_OPTIONAL_LOCKS=0: look, never refresh the index others are using.
    if [ -n "$(GIT_OPTIONAL_LOCKS=0 git status --porcelain -- "${inputs[@]}")" ]; then COMMIT=$COMMIT-dirty; fi
  fi
  : "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct -- "${inputs[@]}")}"
fi
: "${COMMIT:=unknown}" "${SOURCE_DATE_EPOCH:=0}"

if [ -n "${PLATFORMS:-}" ]; then
  platforms=$PLATFORMS
  manifest=${MANIFEST:-}
else
  platforms=$all_platforms
  manifest=${MANIFEST-krew-manifest.yaml}
fi
dist=${DIST_DIR:-dist}
completion=hack/completion/kubectl_complete-gobrave
ldflags="-s -w -X github.com/gobrave/kubectl-gobrave/pkg/cmd.version=$VERSION -X github.com/gobrave/kubectl-gobrave/pkg/cmd.commit=$COMMIT"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$dist"
rm -f "$dist"/kubectl-gobrave_*
go build -o "$stage/disttool" hack/dist.go

extra=()
install -m 0644 LICENSE "$stage/LICENSE"
extra+=("$stage/LICENSE")
has_completion=false
if [ -f "$completion" ]; then
  has_completion=true # decided once: the archives and the manifest's caveats agree
  install -m 0755 "$completion" "$stage/kubectl_complete-gobrave"
  extra+=("$stage/kubectl_complete-gobrave")
fi

log "version $VERSION, commit $COMMIT, $(go env GOVERSION); ${#extra[@]} extra file(s): ${extra[*]##*/}"
start=$(date +%s)
entries=()
for p in $platforms; do
  goos=${p%/*} goarch=${p#*/}
  bin=kubectl-gobrave ext=tar.gz
  if [ "$goos" = windows ]; then bin=kubectl-gobrave.exe ext=zip; fi
  mkdir -p "$stage/$goos-$goarch"
  t=$(date +%s)
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$stage/$goos-$goarch/$bin" ./cmd/kubectl-gobrave
  archive=$dist/kubectl-gobrave_${VERSION}_${goos}_${goarch}.$ext
  "$stage/disttool" archive -o "$archive" -mtime "$SOURCE_DATE_EPOCH" "$stage/$goos-$goarch/$bin" "${extra[@]}"
  log "$archive ($(( $(date +%s) - t ))s)"
  entries+=("$p=$archive")
done

if [ -n "$manifest" ]; then
  comp=()
  if $has_completion; then comp=(-completion); fi
  "$stage/disttool" manifest -template hack/krew/gobrave.yaml.tmpl -o "$manifest" -version "$VERSION" -commit "$COMMIT" "${comp[@]}" "${entries[@]}"
  log "wrote $manifest"
fi
log "built ${#entries[@]} archive(s) in $(( $(date +%s) - start ))s"
