#!/usr/bin/env bash
# Starts a throwaway Kubernetes control plane for the e2e tests and benchmarks: a kwokctl cluster
# with the binary runtime (real etcd, kube-apiserver, kube-controller-manager and kube-scheduler
# built by hack/testbin.sh, plus kwok's fake kubelets), every listener on 127.0.0.1, no Docker.
#
#   hack/cluster-up.sh [--nodes N] [--disable-qps-limits] [--audit-log] [--no-leader-election]
#                      [--controller-syncs N] [NAME]
#
#   NAME                  cluster name (default gobrave-<random>)
#   --nodes N             fake nodes to create (default $GOBRAVE_NODES or 2; each admits 110 pods)
#   --disable-qps-limits  lift the components' client rate limits (benchmarks)
#   --controller-syncs N  the controller manager syncs N deployments, replica sets and jobs at
#                         once (its default is 5; the scale benchmark's 100,000 objects need more)
#   --audit-log           the API server writes an audit log (every request at Metadata level, one
#                         line per stage as JSON) to WORKDIR/clusters/NAME/logs/audit.log
#                         (cluster.env: GOBRAVE_AUDIT_LOG); benchmarks count requests in it
#   --no-leader-election  kube-controller-manager and kube-scheduler run with --leader-elect=false:
#                         under heavy load a lease renewal can time out, and a component that loses
#                         its lease exits (kwokctl does not restart it); benchmarks with thousands
#                         of objects need this
#   GOBRAVE_CLUSTER_DIR   work folder to use instead of a new mktemp -d folder
#   GOBRAVE_KEEP_FAILED=1 leave a cluster that failed to start in place for debugging
#
# Progress goes to stderr; the last (only) line on stdout is the kubeconfig path. The kubeconfig
# has two contexts for the same cluster: kwok-NAME (current) and gobrave-k3s.
# ~/.kube/config is never touched. The work folder ($KWOK_WORKDIR) holds:
#   cluster.env              KWOK_WORKDIR, GOBRAVE_CLUSTER_NAME, GOBRAVE_TESTBIN, KUBECONFIG
#                            (and GOBRAVE_AUDIT_LOG with --audit-log)
#   audit-policy.yaml        with --audit-log: the audit policy
#   kwok.yaml                KwokctlConfiguration, the stages from hack/kwok/, ClusterLogs, ClusterExec
#                            (Logs, PortForward and ClusterPortForward are CRDs: tests create them)
#   logs/pod.log             the log every pod's containers show (CRI format, see docs/testing.md)
#   exec/                    the folder `kubectl exec` commands run in, on this host
#   clusters/NAME/           kwokctl's files: kubeconfig.yaml, logs/ of every component, pids/
#
# Remove it with hack/cluster-down.sh WORKDIR_OR_KUBECONFIG; callers should put that in a trap.
# See docs/testing.md for the stages and the test labels.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
log() { echo "cluster-up: $*" >&2; }
die() { log "error: $*"; exit 1; }

nodes=${GOBRAVE_NODES:-2}
qps=false
audit=false
leader=true
syncs=
name=
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) [ $# -ge 2 ] || die "--nodes needs a number"; nodes=$2; shift 2 ;;
    --nodes=*) nodes=${1#*=}; shift ;;
    --disable-qps-limits) qps=true; shift ;;
    --audit-log) audit=true; shift ;;
    --no-leader-election) leader=false; shift ;;
    --controller-syncs) [ $# -ge 2 ] || die "--controller-syncs needs a number"; syncs=$2; shift 2 ;;
    --controller-syncs=*) syncs=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    -*) die "unknown flag $1 (see --help)" ;;
    *) [ -z "$name" ] || die "more than one cluster name given"; name=$1; shift ;;
  esac
done
case $nodes in ''|*[!0-9]*) die "--nodes wants a positive number, got '$nodes'" ;; esac
[ "$nodes" -ge 1 ] || die "--nodes wants at least 1"
case $syncs in ''|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;; *) die "--controller-syncs wants 1 to 999, got '$syncs'" ;; esac
name=${name:-gobrave-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}

start=$(date +%s.%N)
bin=$("$here/testbin.sh")
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing: run hack/testbin.sh"
done

# The marker says "cluster-up.sh made this folder": cluster-down.sh deletes only folders carrying
# it, so a GOBRAVE_CLUSTER_DIR naming a folder of the user's is never removed. Such a folder is
# refused here unless it is new, empty, or an earlier cluster's work folder.
marker=.gobrave-cluster-workdir
if [ -n "${GOBRAVE_CLUSTER_DIR:-}" ]; then
  workdir=$GOBRAVE_CLUSTER_DIR
  if [ -e "$workdir" ] && [ ! -f "$workdir/$marker" ] && [ -n "$(ls -A "$workdir" 2>/dev/null)" ]; then
    die "GOBRAVE_CLUSTER_DIR=$workdir is a folder with files and not a cluster work folder: name a new or empty folder"
  fi
  mkdir -p "$workdir"
  workdir=$(cd "$workdir" && pwd)
else
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/gobrave-cluster.XXXXXX")
fi
echo "made by hack/cluster-up.sh for cluster $name; hack/cluster-down.sh deletes this folder" >"$workdir/$marker"
export KWOK_WORKDIR=$workdir
kubeconfig=$workdir/clusters/$name/kubeconfig.yaml
# Nothing this script runs may read or write ~/.kube.
export KUBECONFIG=$kubeconfig
export KUBECACHEDIR=$workdir/kube-cache
mkdir -p "$workdir/logs" "$workdir/exec" "$KUBECACHEDIR"
: >"$workdir/logs/pod.log"

# Written first, so cluster-down.sh can clean up even a half-started cluster.
cat >"$workdir/cluster.env" <<EOF
KWOK_WORKDIR=$workdir
GOBRAVE_CLUSTER_NAME=$name
GOBRAVE_TESTBIN=$bin
KUBECONFIG=$kubeconfig
EOF
if $audit; then
  echo "GOBRAVE_AUDIT_LOG=$workdir/clusters/$name/logs/audit.log" >>"$workdir/cluster.env"
  # One JSON line per request and stage (ResponseStarted for watches, ResponseComplete), with the
  # user agent; never the request or response bodies.
  cat >"$workdir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
- RequestReceived
rules:
- level: Metadata
EOF
fi

fail() {
  local rc=$?
  [ $rc -eq 0 ] && return
  log "failed (exit $rc); the last lines of the component logs follow"
  for f in "$workdir/clusters/$name"/logs/*.log; do
    [ -f "$f" ] || continue
    log "--- last lines of $f"
    tail -n 5 "$f" >&2 || true
  done
  if [ "${GOBRAVE_KEEP_FAILED:-}" = 1 ]; then
    log "GOBRAVE_KEEP_FAILED=1: left in place; remove with hack/cluster-down.sh $workdir"
  else
    "$here/cluster-down.sh" "$workdir" >&2 || true
  fi
}
trap fail EXIT
trap 'exit 130' INT TERM HUP # run the EXIT trap on signals too

# The kwokctl configuration: local binaries, loopback only, and our stages. Any Stage in the
# configuration replaces all of kwok's defaults, hence the node stages and the fast pod stages.
{
  cat <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeApiserverBinary: $bin/kube-apiserver
  kubeControllerManagerBinary: $bin/kube-controller-manager
  kubeSchedulerBinary: $bin/kube-scheduler
  kubectlBinary: $bin/kubectl
  etcdBinary: $bin/etcd
  kwokControllerBinary: $bin/kwok
  disableQPSLimits: $qps
  # Logs objects (one per pod, namespaced, named after the pod) are read from the API server, so a
  # test can give one pod a log file of its own; other pods use the ClusterLogs below.
  # PortForward (one per pod, namespaced, named after the pod) and ClusterPortForward objects
  # too: a test starts a loopback listener and creates a ClusterPortForward whose selector names
  # its namespace, so that every pod there (a replacement pod included) forwards to it, or a
  # PortForward for one pod, which takes precedence (kubectl port-forward and gobrave
  # port-forward then carry real bytes).
  enableCRDs:
  - Logs
  - PortForward
  - ClusterPortForward
EOF
  if $audit; then
    # kwokctl passes --audit-policy-file and --audit-log-path (clusters/NAME/logs/audit.log).
    echo "  kubeAuditPolicy: $workdir/audit-policy.yaml"
  fi
  if $audit || ! $leader || [ -n "$syncs" ]; then
    echo "componentsPatches:"
  fi
  if $audit; then
    # The log is never rotated, so that a reader can keep byte offsets into one file.
    cat <<EOF
- name: kube-apiserver
  extraArgs:
  - key: audit-log-maxsize
    value: "1000000"
EOF
  fi
  # One patch per component, with all of its arguments.
  if ! $leader || [ -n "$syncs" ]; then
    echo "- name: kube-controller-manager"
    echo "  extraArgs:"
    if ! $leader; then
      printf '  - key: leader-elect\n    value: "false"\n'
    fi
    if [ -n "$syncs" ]; then
      for k in concurrent-deployment-syncs concurrent-replicaset-syncs concurrent-job-syncs; do
        printf '  - key: %s\n    value: "%s"\n' "$k" "$syncs"
      done
    fi
  fi
  if ! $leader; then
    printf -- '- name: kube-scheduler\n  extraArgs:\n  - key: leader-elect\n    value: "false"\n'
  fi
  for f in node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete \
    pod-container-running-failed gobrave-pod-exit-code gobrave-pod-waiting gobrave-pod-crash-loop; do
    printf -- '---\n'
    grep -v '^#' "$here/kwok/$f.yaml"
  done
  cat <<EOF
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: gobrave-all-pods
spec:
  logs:
  - logsFile: $workdir/logs/pod.log
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: gobrave-all-pods
spec:
  execs:
  - local:
      workDir: $workdir/exec
      envs:
      - name: GOBRAVE_E2E_EXEC
        value: "1"
EOF
} >"$workdir/kwok.yaml"

create=("$bin/kwokctl" --name "$name" create cluster --runtime binary --kubeconfig "" --wait 2m)
# kwokctl picks its ports by probing downwards from 32766 and the components bind them seconds
# later, so two clusters starting at once would pick the same ports. Starts are serialised on a
# lock (-o: the components must not inherit it). The lock is the user's own (in
# $XDG_RUNTIME_DIR, else the cache folder, mode 0700): a fixed name in /tmp could be
# pre-created by another user to block or watch our starts. Two users' clusters starting in the
# same second may still collide on a port; kwokctl then fails and cluster-up.sh says so.
lockdir=${XDG_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}}/gobrave
mkdir -p -m 700 "$lockdir"
[ -O "$lockdir" ] || die "$lockdir is not yours: set XDG_RUNTIME_DIR or XDG_CACHE_HOME to a folder of your own"

# start_once creates the cluster, its nodes and the second context, then waits for the default
# ServiceAccount, which the controller manager makes and every pod in "default" needs. It sets
# kcm_exited=true when the controller manager exited before that (it returns 0 either way:
# called in a condition, set -e would not stop at a failing command inside it): on a loaded machine it gives up
# when the API server does not answer within 10 s of its start ("failed to wait for apiserver
# being healthy"; seen in CI while the API server's rbac/bootstrap-roles hook still ran), and
# kwokctl does not restart a component that exits, so no controller would ever run.
start_once() {
  if command -v flock >/dev/null; then
    flock -o -w 300 "$lockdir/cluster-up.lock" "${create[@]}" >&2
  else
    log "flock not found: do not start two clusters at once"
    "${create[@]}" >&2
  fi
  [ -s "$kubeconfig" ] || die "kwokctl did not write $kubeconfig"

  # Nodes first: pods created before any node exists wait ~15 s for the scheduler to retry.
  log "creating $nodes node(s)"
  "$bin/kwokctl" --name "$name" scale node --replicas "$nodes" >&2
  "$bin/kubectl" wait --for=condition=Ready node --all --timeout=2m >&2

  # A second context on the same cluster, for tests that switch contexts.
  local ctx cluster user
  ctx=$("$bin/kubectl" config current-context)
  cluster=$("$bin/kubectl" config view -o jsonpath="{.contexts[?(@.name==\"$ctx\")].context.cluster}")
  user=$("$bin/kubectl" config view -o jsonpath="{.contexts[?(@.name==\"$ctx\")].context.user}")
  "$bin/kubectl" config set-context gobrave-k3s --cluster="$cluster" --user="$user" >&2

  local kcm_pid=$workdir/clusters/$name/pids/kube-controller-manager.pid
  local deadline=$((SECONDS + 60))
  while [ $SECONDS -lt $deadline ]; do
    if "$bin/kubectl" -n default get serviceaccount default >/dev/null 2>&1; then
      kcm_exited=false
      return 0
    fi
    if [ -f "$kcm_pid" ] && ! kill -0 "$(cat "$kcm_pid")" 2>/dev/null; then
      tail -n 5 "$workdir/clusters/$name/logs/kube-controller-manager.log" >&2 || true
      kcm_exited=true
      return 0
    fi
    sleep 0.1
  done
  die "no default ServiceAccount 60 s after the start: the controller manager is not working (its log is above)"
}

# When the controller manager exits during the start, the cluster is deleted and created again
# from nothing, at most twice. Not a restart of the components on the same data: kwok's node
# leases (200 s) would still name the stopped kwok controller, and the new one would leave every
# pod Pending until they expire.
attempt=1
log "starting cluster $name in $workdir"
while :; do
  start_once
  $kcm_exited || break
  [ $attempt -lt 3 ] ||
    die "kube-controller-manager exited during the start, $attempt times (its log is above; on a loaded machine it gives up when the API server is slow to answer): run again when the machine is less busy"
  log "kube-controller-manager exited during the start (the API server was slow to answer); deleting the cluster and starting it again ($attempt/2)"
  "$bin/kwokctl" --name "$name" delete cluster >&2 || die "kwokctl delete cluster failed"
  attempt=$((attempt + 1))
done

# Nothing of this cluster may listen beyond loopback.
if command -v ss >/dev/null; then
  for f in "$workdir/clusters/$name"/pids/*.pid; do
    pid=$(cat "$f")
    open=$(ss -ltnpH 2>/dev/null | grep "pid=$pid," | awk '$4 !~ /^127\.0\.0\.1:/ {print $4}' || true)
    [ -z "$open" ] || die "$(basename "$f" .pid) (pid $pid) listens on $open, not only 127.0.0.1"
  done
fi

trap - EXIT
log "cluster $name ready in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')s"
echo "$kubeconfig"
