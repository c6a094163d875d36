#!/usr/bin/env bash
# The README's "run it" command (make demo): a short, real lifecycle on a local control plane.
# Builds nothing itself beyond what `make demo` already built; starts a kwok cluster (real
# kube-apiserver, controllers and scheduler; fake kubelets), runs every verb through kubectl's own
# plugin discovery, prints each command and its output, and removes the cluster at the end.
#
# Against your own cluster instead: run the same commands (see README.md's tour).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$root/bin/kubectl-gobrave" ] || { echo "demo: run 'make demo' (bin/kubectl-gobrave is missing)" >&2; exit 1; }
testbin=$("$root/hack/testbin.sh")

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
