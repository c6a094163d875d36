#!/usr/bin/env bash
# `make test-dist`: the release archives install and run the way users get them.
#
# Builds all six archives and a fresh manifest (hack/dist.sh, into dist/ and a
# temp file, so the repository's krew-manifest.yaml is only read), validates the
# manifest with krew's validate-krew-manifest, installs the linux/amd64 archive
# with krew itself into a temp KREW_ROOT (krew checks the sha256), runs
# `kubectl gobrave version --client` through krew's link with a real kubectl,
# and checks that the committed krew-manifest.yaml is what `make dist` writes:
# every field, and the sha256 values too when the sources are committed
# (builds are reproducible: the same sources, VERSION, COMMIT and Go version give
# the same bytes; a second linux/amd64 build proves it on every run).
#
# krew v0.4.3 is built from the tools module hack/krew into
# ~/.cache/gobrave-testbin/krew-v0.4.3/ (GOBRAVE_KREW_BIN=DIR), once.
# VERSION is passed through to hack/dist.sh (default: see there).
set -euo pipefail

KREW_VERSION=v0.4.3
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { echo "test-dist: $*" >&2; }

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
summary() { echo "test-dist: $passed passed, $failed failed"; }
stop() { fail "$@"; summary; exit 1; }

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# krew and validate-krew-manifest, from their own module (never the plugin's go.mod).
krewbin=${GOBRAVE_KREW_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/gobrave-testbin/krew-$KREW_VERSION}
if ! [ -x "$krewbin/krew" ] || ! [ -x "$krewbin/validate-krew-manifest" ]; then
  log "building krew $KREW_VERSION into $krewbin"
  mkdir -p "$krewbin"
  (cd hack/krew && for c in krew validate-krew-manifest; do
    CGO_ENABLED=0 go build -trimpath -o "$krewbin/$c.tmp" "sigs.k8s.io/krew/cmd/$c"
    mv "$krewbin/$c.tmp" "$krewbin/$c"
  done)
fi

# A real kubectl: the control plane's, else the machine's.
kubectl=${GOBRAVE_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/gobrave-testbin/v1.37.2}/kubectl
[ -x "$kubectl" ] || kubectl=$(command -v kubectl || true)
[ -n "$kubectl" ] || stop "no kubectl (run make testbin, or install kubectl)"

# 1. The archives and a fresh manifest.
fresh=$tmp/krew-manifest.yaml
start=$(date +%s)
MANIFEST=$fresh hack/dist.sh 2>"$tmp/dist.log" || { cat "$tmp/dist.log" >&2; stop "hack/dist.sh"; }
cat "$tmp/dist.log" >&2
log "dist took $(( $(date +%s) - start ))s"
version=$(sed -n 's/^  version: //p' "$fresh")
commit=$(sed -n 's/^# Archives built from commit \([^ ]*\) .*/\1/p' "$fresh")
archive=dist/kubectl-gobrave_${version}_linux_amd64.tar.gz
n=$(grep -c '^  - selector:' "$fresh" || true)
missing=$(sed -n 's|^    uri: .*/||p' "$fresh" | while read -r a; do [ -f "dist/$a" ] || echo "$a"; done)
want="LICENSE kubectl-gobrave"
[ -f hack/completion/kubectl_complete-gobrave ] && want+=" kubectl_complete-gobrave"
got=$(tar tzf "$archive" 2>&1 | LC_ALL=C sort | paste -sd' ')
if [ "$n" = 6 ] && [ -z "$missing" ] && [ "$got" = "$want" ]; then
  pass "dist: 6 platforms in the manifest, every archive in dist/, $archive holds $want"
else
  fail "dist: want 6 platforms with archives in dist/ (got $n, missing: ${missing:-none}) and $archive holding $want (got: $got)"
fi

# 2. krew's own validation (the file must be named after the plugin).
cp "$fresh" "$tmp/gobrave.yaml"
if out=$("$krewbin/validate-krew-manifest" -manifest "$tmp/gobrave.yaml" -skip-install 2>&1); then
  pass "validate-krew-manifest -skip-install"
else
  fail "validate-krew-manifest: $out"
fi

# 3. Install with krew from the local archive; krew checks its sha256.
export KREW_ROOT=$tmp/krew KREW_NO_UPGRADE_CHECK=1
mkdir -p "$KREW_ROOT"
if out=$("$krewbin/krew" install --manifest="$tmp/gobrave.yaml" --archive="$archive" 2>&1) &&
  [ "$(readlink "$KREW_ROOT/bin/kubectl-gobrave")" = "$KREW_ROOT/store/gobrave/$version/kubectl-gobrave" ]; then
  pass "krew install --manifest --archive: $KREW_ROOT/bin/kubectl-gobrave -> store/gobrave/$version"
else
  stop "krew install: $out"
fi

# 4. kubectl finds the plugin through krew's link and it reports the stamped version.
if out=$(env PATH="$KREW_ROOT/bin:/usr/bin:/bin" GOBRAVE_HOME="$tmp/home" KUBECONFIG="$tmp/none" \
  "$kubectl" gobrave version --client 2>&1) &&
  grep -qx "Client Version: $version" <<<"$out" && grep -qx "Git Commit: $commit" <<<"$out"; then
  pass "$(basename "$kubectl") gobrave version --client: $version, commit $commit"
else
  fail "kubectl gobrave version --client (want $version, commit $commit): $out"
fi

# 4b. The caveats' completion recipe: link the shipped kubectl_complete-gobrave, then complete.
if [ -f hack/completion/kubectl_complete-gobrave ]; then
  ln -sf "$KREW_ROOT/store/gobrave/$version/kubectl_complete-gobrave" "$KREW_ROOT/bin/kubectl_complete-gobrave"
  if out=$(env PATH="$KREW_ROOT/bin:$(dirname "$kubectl"):/usr/bin:/bin" GOBRAVE_HOME="$tmp/home" KUBECONFIG="$tmp/none" \
    "$kubectl" __complete gobrave st 2>/dev/null) && grep -q '^start' <<<"$out" && grep -q '^stop' <<<"$out"; then
    pass "completion through the installed kubectl_complete-gobrave: kubectl gobrave st<TAB> offers start, stop"
  else
    fail "completion through the installed kubectl_complete-gobrave: $out"
  fi
fi

# 5. The committed manifest is what make dist writes: every field but sha256
#    and the provenance line...
strip() { grep -v -e '^    sha256: ' -e '^# Archives built from ' "$1"; }
if [ ! -f krew-manifest.yaml ]; then
  fail "krew-manifest.yaml is missing: run make dist"
elif d=$(diff <(strip krew-manifest.yaml) <(strip "$fresh")); then
  pass "krew-manifest.yaml is current apart from sha256 (version $version)"
else
  fail "krew-manifest.yaml is stale: run make dist (VERSION=$version) and commit it; diff committed fresh:"$'\n'"$d"
fi

# 6. ...and its sha256 values, when the sources are committed (a -dirty build
#    cannot match anything committed).
if [[ $commit == *-dirty ]]; then
  echo "skip krew-manifest.yaml sha256: the sources have uncommitted changes (commit $commit)"
elif [ -f krew-manifest.yaml ] && diff -q <(grep -e '^    sha256: ' krew-manifest.yaml) <(grep -e '^    sha256: ' "$fresh") >/dev/null; then
  pass "krew-manifest.yaml sha256 values match a fresh build of commit $commit"
else
  fail "krew-manifest.yaml sha256 values differ from a fresh build: run make dist and commit it
  committed: $(grep '^# Archives built from ' krew-manifest.yaml 2>/dev/null)
  fresh:     $(grep '^# Archives built from ' "$fresh")"
fi

# 7. Reproducible: a second linux/amd64 build gives the same archive.
if PLATFORMS=linux/amd64 MANIFEST= DIST_DIR=$tmp/again hack/dist.sh 2>"$tmp/again.log" &&
  [ "$(sha256sum <"$archive")" = "$(sha256sum <"$tmp/again/${archive##*/}")" ]; then
  pass "reproducible: a second linux/amd64 build has the same sha256"
else
  cat "$tmp/again.log" >&2
  fail "a second linux/amd64 build differs from $archive"
fi

summary
[ "$failed" -eq 0 ]
