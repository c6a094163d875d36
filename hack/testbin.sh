#!/usr/bin/env bash
# Builds the real control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, kwokctl) from the Go module proxy into a
# cache folder keyed by version, outside the repository. When every binary is
# already there it builds nothing. Prints the folder on stdout.
#
#   hack/testbin.sh            build if needed, print the folder
#   GOBRAVE_TESTBIN=DIR        use DIR instead of the cache folder
set -euo pipefail

K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
here=$(cd "$(dirname "$0")" && pwd)
dir=${GOBRAVE_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/gobrave-testbin/$K8S_VERSION}
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl)

missing=()
for b in "${bins[@]}"; do [ -x "$dir/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$dir"
  exit 0
fi

log() { echo "testbin: $*" >&2; }
log "building ${missing[*]} into $dir (a cold build takes about 10 minutes on 2 cores)"
mkdir -p "$dir"
cd "$here/tools"

# k8s.io/kubernetes replaces its staging modules with local folders; derive the
# replace list from its own go.mod instead of typing it, and keep ours in sync.
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -n "$gomod" ] || { log "cannot locate go.mod of k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod"); do
  want="$m => $m $STAGING_VERSION"
  if ! grep -qF "$want" go.mod; then
    log "adding replace $want"
    go mod edit -replace "$m=$m@$STAGING_VERSION"
  fi
done

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
start=$(date +%s)
for b in "${missing[@]}"; do
  case $b in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    kwok|kwokctl) pkg=sigs.k8s.io/kwok/cmd/$b ;;
    *) pkg=k8s.io/kubernetes/cmd/$b ;;
  esac
  log "go build $pkg"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$b.tmp" "$pkg"
  mv "$dir/$b.tmp" "$dir/$b"
done
log "built in $(( $(date +%s) - start ))s"
echo "$dir"
