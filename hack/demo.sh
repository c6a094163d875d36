#!/usr/bin/env bash
# The README's "run it" command (make demo): a short, real lifecycle on a local control plane.
# Builds the plugin (make build) and the control plane (hack/testbin.sh) when they are not built
# yet, starts a kwok cluster (real kube-apiserver, controllers and scheduler; fake kubelets), runs
# every verb through kubectl's own plugin discovery, prints each command and its output, and
# removes the cluster at the end.
#
# The first run compiles Kubernetes: it says so up front, with why, roughly how long and where the
# result is cached, then prints each build step as it goes (stderr, prefixed demo: and testbin:) and
# the time each step took. Runs with everything cached say nothing about builds.
#
# It honours what the builds honour: GOBRAVE_TESTBIN (the control plane's folder), XDG_CACHE_HOME,
# GOMODCACHE, GOCACHE, GOPROXY, GOFLAGS; MAKE (set by make demo) runs the plugin's build.
#
# Against your own cluster instead: run the same commands (see README.md's tour).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
make=${MAKE:-make}
log() { echo "demo: $*" >&2; }
# 75 -> 1m15s
dur() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
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

# What is not built yet? Asked offline and without building anything.
cpdir=$(hack/testbin.sh --check) && cold_cp=false || cold_cp=true
cold_mods=false
cold_plugin=false
if ! GOPROXY=off go list -deps ./cmd/kubectl-gobrave >/dev/null 2>&1; then
  cold_mods=true
  cold_plugin=true
elif [ "$(CGO_ENABLED=0 go list -trimpath -deps -f '{{if .Stale}}x{{end}}' ./cmd/kubectl-gobrave | grep -c x)" -gt 50 ]; then
  cold_plugin=true # the modules are there but the build cache is not (client-go, cli-runtime ...)
fi
first=false
if $cold_cp || $cold_plugin; then
  first=true
  log "first run: this builds from source what is not cached yet, so it takes a while."
  log "  Measured with empty Go caches on 2 cores: 18 min of CPU time, so about 10-12 min on an idle machine;"
  log "  45 min on one shared with other builds. Later runs: 10-30 s."
  if $cold_plugin; then
    log "  - the plugin (bin/kubectl-gobrave): $($cold_mods && echo "downloads its Go modules into $(go env GOMODCACHE), then ")compiles client-go and its other dependencies into $(go env GOCACHE)."
  fi
  if $cold_cp; then
    log "  - the control plane: the demo talks to a real kube-apiserver, etcd, kube-controller-manager and"
    log "    kube-scheduler (kwok plays the kubelets), and there is no Docker here to pull them as images, so"
    log "    hack/testbin.sh compiles Kubernetes v1.37.2, etcd and kwok from the Go module proxy: 7 binaries,"
    log "    about 2,500 packages, the bulk of the wait. They are cached in $cpdir (about 500 MB)"
    log "    and reused by every later make demo, make test and hack/cluster-up.sh."
  fi
  log "  Each step below prints how long the previous one took."
fi

start=$SECONDS
times=()
if $cold_mods; then
  log "plugin: downloading the Go modules its build needs"
  t0=$SECONDS
  go list -deps ./cmd/kubectl-gobrave 2>&1 >/dev/null | downloads "plugin"
  times+=("plugin modules $(dur $((SECONDS - t0)))")
  log "plugin: modules downloaded in $(dur $((SECONDS - t0)))"
fi
$first && log "plugin: make build"
t0=$SECONDS
"$make" --no-print-directory build >&2
$first && times+=("plugin build $(dur $((SECONDS - t0)))") && log "plugin: built in $(dur $((SECONDS - t0)))"
t0=$SECONDS
testbin=$(hack/testbin.sh)
$cold_cp && times+=("control plane $(dur $((SECONDS - t0)))")
t_demo=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gobrave-demo.XXXXXX")
kubeconfig=
cleanup() {
  [ -n "$kubeconfig" ] && "$root/hack/cluster-down.sh" "$kubeconfig" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

echo "# starting a local control plane (kube-apiserver, etcd, controller-manager, scheduler, 2 kwok nodes)"
kubeconfig=$("$root/hack/cluster-up.sh" 2>"$tmp/cluster-up.log") || { cat "$tmp/cluster-up.log" >&2; exit 1; }
workdir=$(dirname "$(dirname "$(dirname "$kubeconfig")")")

export KUBECONFIG=$kubeconfig KUBECACHEDIR=$tmp/kube-cache
export GOBRAVE_HOME=$tmp/gobrave XDG_CONFIG_HOME=$tmp/config XDG_DATA_HOME=$tmp/data
export PATH=$root/bin:$testbin:$PATH

step() {
  local out='$' a
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '\n%s\n' "$out"
  "$@" || echo "(exit code $?)"
}
# Pods of this cluster read their logs from one file; write what the web server "prints".
if [ -f "$workdir/logs/pod.log" ]; then
  for i in 1 2 3; do
    printf '%s stdout F GET /index.html 200 (request %d)\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" "$i" >>"$workdir/logs/pod.log"
  done
fi

step kubectl gobrave version
step kubectl gobrave create web --image nginx:1.27 --port 80 --expose --env MODE=demo --cpu 0.25 --memory 128Mi
step kubectl gobrave run report --kind job --detach --image busybox:1.36 --timeout 1m -- sh -c "echo report done"
step kubectl gobrave wait web --for=started --timeout 1m
step kubectl gobrave ps
step kubectl gobrave inspect web
step kubectl gobrave logs web --tail 2
step kubectl gobrave stop web --wait --timeout 1m
step kubectl gobrave start web --wait --timeout 1m
echo
echo "# a task whose container exits with code 42 (the local cluster's test label makes it fail)"
step kubectl gobrave create crash --kind job --image busybox:1.36 --label gobrave.test/exit-code=42 -- sh -c 'exit 42'
step kubectl gobrave wait crash --for=failed --timeout 1m
echo
echo "# nothing was monitoring 'report' when it completed: a reconcile pass records it"
step kubectl gobrave recover --once
step kubectl gobrave ps -a -o wide
step kubectl gobrave delete web report crash --wait --timeout 1m
step kubectl gobrave events web
step kubectl gobrave ps -a
echo
echo "# done; removing the cluster"
if $first; then
  times+=("cluster and demo $(dur $((SECONDS - t_demo)))")
  summary=$(printf '%s, ' "${times[@]}")
  log "first run took $(dur $((SECONDS - start))) (${summary%, }); later runs skip the builds"
fi
