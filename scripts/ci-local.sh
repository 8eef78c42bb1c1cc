#!/usr/bin/env bash
# CI as its machine runs it, on this one: a fresh clone of HEAD beside this checkout
# (so that ../shared is where the tests look for it), then `CI=true .ci/run` in it.
# CI's machine has no CUDA toolkit; where this one has one in /usr/local/cuda, it is
# hidden from the run (an empty tmpfs over it in a mount namespace of the run's own:
# root and unshare(1) needed), so that the build without CUDA is the one tested, as
# there. Usage: scripts/ci-local.sh [FOLDER] (default ../ci-<commit>); the log is
# FOLDER.log. Exit status: the run's.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short HEAD)
dest=${1:-../ci-$commit}
if [ -e "$dest" ]; then echo "ci-local: $dest exists; give another folder" >&2; exit 2; fi
git clone -q . "$dest"
log="$dest.log"
echo "ci-local: $commit in $dest, log $log"
run='cd "$1" && CI=true .ci/run'
if [ -d /usr/local/cuda ]; then
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    run='mount -t tmpfs none /usr/local/cuda && export PATH=$(printf %s "$PATH" | sed "s#/usr/local/cuda/bin:##") && '"$run"
    exec unshare -m bash -c "$run" ci-local "$dest" >"$log" 2>&1
  fi
  echo "ci-local: warning: /usr/local/cuda stays visible (needs root and unshare): this run builds the CUDA half, CI's does not" >&2
fi
exec bash -c "$run" ci-local "$dest" >"$log" 2>&1
