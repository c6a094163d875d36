#!/usr/bin/env bash
# Builds the real control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, kwokctl) from the Go module proxy into a
# cache folder keyed by version, outside the repository. When every binary is
# already there it builds nothing. Prints the folder on stdout (that line only).
#
#   hack/testbin.sh            build if needed, print the folder
#   hack/testbin.sh --check    build nothing, print the folder; exit 0 if every binary is
#                              there, 1 if a build is needed (hack/demo.sh asks this)
#   GOBRAVE_TESTBIN=DIR        use DIR instead of the cache folder
#
# Progress goes to stderr, each step measured (never estimated); from a cold run:
#   testbin: modules: 206 modules ready in 13s; packages to compile: 2524
#   testbin: [1/7] kube-apiserver (modules took 13s)
#   testbin:       1482/2524 packages compiled (kube-apiserver 18m29s so far)    about once a minute
#   testbin: [2/7] kube-controller-manager (kube-apiserver took 22m07s)
#   ...
#   testbin: built 7 binaries in 38m01s (modules 13s, kube-apiserver 22m07s, ...; 2524 packages compiled)
# The first binary compiles most of the packages the others share, so it takes longest.
set -euo pipefail

K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
here=$(cd "$(dirname "$0")" && pwd)
dir=${GOBRAVE_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/gobrave-testbin/$K8S_VERSION}
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl)

check=false
case ${1:-} in
  '') ;;
  --check) check=true ;;
  *) echo "testbin: unknown argument '$1' (usage: hack/testbin.sh [--check])" >&2; exit 2 ;;
esac

missing=()
for b in "${bins[@]}"; do [ -x "$dir/$b" ] || missing+=("$b"); done
if $check; then
  echo "$dir"
  [ ${#missing[@]} -eq 0 ]
  exit
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "$dir"
  exit 0
fi

log() { echo "testbin: $*" >&2; }
# 75 -> 1m15s, 3725 -> 1h02m05s
dur() {
  local s=$1
  if [ "$s" -ge 3600 ]; then printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
  elif [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60))
  else printf '%ds' "$s"; fi
}
# go prints "go: downloading MODULE VERSION" per module fetched; condense those to a line every
# 10 s (true progress without a screenful of names) and pass anything else (errors) through.
downloads() {
  local n=0 last=$SECONDS line
  while IFS= read -r line; do
    if [[ $line == 'go: downloading '* ]]; then
      n=$((n + 1))
      if [ $((SECONDS - last)) -ge 10 ]; then
        last=$SECONDS
        log "$1: $n modules downloaded so far (${line#go: downloading })"
      fi
    else
      echo "$line" >&2
    fi
  done
  [ "$n" -eq 0 ] || log "$1: $n modules downloaded"
}
pkgof() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    kwok|kwokctl) echo "sigs.k8s.io/kwok/cmd/$1" ;;
    *) echo "k8s.io/kubernetes/cmd/$1" ;;
  esac
}
pkgs=()
for b in "${missing[@]}"; do pkgs+=("$(pkgof "$b")"); done
n=${#missing[@]}

log "building ${missing[*]} into $dir"
log "(compiled from source, once: no Docker here to pull them as images. Measured with empty Go caches: 14 min of CPU time, so about 8 min on an idle 2-core machine, 38 min on a busy one; later runs reuse the binaries)"
mkdir -p "$dir"
cd "$here/tools"
export CGO_ENABLED=0
flags=(-trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37")
start=$SECONDS

# Phase 1, modules: resolve and download every module the seven binaries import (go list
# downloads what the module cache lacks), and count the packages the build cache lacks.
log "modules: resolving and downloading what the Go module cache lacks (an empty module cache grows to about 1 GB)"
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
list=$({ go list "${flags[@]}" -deps -f '{{.Stale}} {{with .Module}}{{.Path}}{{end}}' "${pkgs[@]}" 2>&1 1>&3 | downloads modules; } 3>&1)
total=$(grep -c '^true' <<<"$list" || true)
modules=$(awk '$2 != "" {print $2}' <<<"$list" | sort -u | wc -l)
took=$((SECONDS - start))
times=("modules $(dur "$took")")
log "modules: $modules modules ready in $(dur "$took"); packages to compile: $total"

# Phase 2, one go build per binary. go build -v names each package as it compiles it; those lines
# are counted for the progress line, anything else (errors) is passed through.
prev="modules took $(dur "$took")"
count=$(mktemp "${TMPDIR:-/tmp}/testbin-count.XXXXXX")
trap 'rm -f "$count"' EXIT
compiled=0
i=0
for b in "${missing[@]}"; do
  i=$((i + 1))
  pkg=$(pkgof "$b")
  log "[$i/$n] $b ($prev)"
  t0=$SECONDS
  last=$SECONDS
  set +e
  go build -v "${flags[@]}" -o "$dir/$b.tmp" "$pkg" 2>&1 | {
    c=$compiled
    while IFS= read -r line; do
      if [[ $line =~ ^[A-Za-z0-9._~/-]+$ ]]; then
        c=$((c + 1))
        if [ $((SECONDS - last)) -ge 60 ]; then
          last=$SECONDS
          log "      $c/$total packages compiled ($b $(dur $((SECONDS - t0))) so far)"
        fi
      else
        echo "$line" >&2
      fi
    done
    echo "$c" >"$count"
  }
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    log "go build $pkg failed (exit $rc) after $(dur $((SECONDS - t0)))"
    rm -f "$dir/$b.tmp"
    exit "$rc"
  fi
  compiled=$(cat "$count")
  mv "$dir/$b.tmp" "$dir/$b"
  took=$((SECONDS - t0))
  times+=("$b $(dur "$took")")
  prev="$b took $(dur "$took")"
done
summary=$(printf '%s, ' "${times[@]}")
log "built $n binaries in $(dur $((SECONDS - start))) (${summary%, }; $compiled packages compiled)"
echo "$dir"
