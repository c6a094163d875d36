#!/usr/bin/env bash
# Removes a cluster started by hack/cluster-up.sh: stops it with kwokctl, kills any of its processes
# that are still alive, and deletes its work folder. Safe to run more than once, and on a cluster
# that only half started.
#
#   hack/cluster-down.sh WORKDIR_OR_KUBECONFIG
#
# WORKDIR_OR_KUBECONFIG is the work folder (the one holding cluster.env) or the kubeconfig path that
# cluster-up.sh printed. Callers should run it from a trap so a failed or interrupted run does not
# leave etcd and the API server behind:
#
#   kubeconfig=$(hack/cluster-up.sh)
#   trap 'hack/cluster-down.sh "$kubeconfig"' EXIT
set -euo pipefail

log() { echo "cluster-down: $*" >&2; }

[ $# -eq 1 ] && [ -n "$1" ] || { log "usage: $0 WORKDIR_OR_KUBECONFIG"; exit 2; }

# Find the folder holding cluster.env: the argument itself or one of its parents
# (the kubeconfig is WORKDIR/clusters/NAME/kubeconfig.yaml).
dir=$1
[ -d "$dir" ] || dir=$(dirname "$dir")
workdir=
while [ -d "$dir" ] && [ "$dir" != / ]; do
  if [ -f "$dir/cluster.env" ]; then workdir=$(cd "$dir" && pwd); break; fi
  dir=$(dirname "$dir")
done
if [ -z "$workdir" ]; then
  log "nothing to do: no cluster.env at or above $1"
  exit 0
fi

name=$(sed -n 's/^GOBRAVE_CLUSTER_NAME=//p' "$workdir/cluster.env")
bin=$(sed -n 's/^GOBRAVE_TESTBIN=//p' "$workdir/cluster.env")

if [ -n "$name" ] && [ -x "$bin/kwokctl" ] && [ -d "$workdir/clusters/$name" ]; then
  log "deleting cluster $name"
  # kwokctl refuses an empty --kubeconfig on delete: hand it a throwaway file.
  KWOK_WORKDIR=$workdir KUBECONFIG=$workdir/delete-kubeconfig.yaml \
    "$bin/kwokctl" --name "$name" delete cluster --kubeconfig "$workdir/delete-kubeconfig.yaml" >&2 ||
    log "kwokctl delete failed; killing the processes instead"
fi

# Whatever control-plane process is still running with this work folder on its command line
# belongs to this cluster (every component gets its config, certs or data under the folder, whose
# name is unique). Only the component binaries are considered, never a shell or the caller.
pids() {
  local p argv0
  for p in /proc/[0-9]*; do
    argv0=
    IFS= read -r -d '' argv0 <"$p/cmdline" 2>/dev/null || [ -n "$argv0" ] || continue
    case ${argv0##*/} in
      etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|kwok-controller|kwokctl) ;;
      *) continue ;;
    esac
    grep -qaF "$workdir/" "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}
left=$(pids)
if [ -n "$left" ]; then
  log "stopping leftover processes: $(echo $left)"
  kill $left 2>/dev/null || true
  for _ in $(seq 50); do
    left=$(pids)
    [ -z "$left" ] && break
    sleep 0.1
  done
  [ -z "$left" ] || { log "killing: $(echo $left)"; kill -9 $left 2>/dev/null || true; }
fi

# Only a folder cluster-up.sh made (it carries the marker) is deleted: GOBRAVE_CLUSTER_DIR may
# have named a folder of the user's, and a cluster.env can be anywhere above the argument.
if [ ! -f "$workdir/.gobrave-cluster-workdir" ]; then
  log "not removing $workdir: it has no .gobrave-cluster-workdir marker, so hack/cluster-up.sh did not make it"
  exit 0
fi
rm -rf "$workdir"
log "removed $workdir"
