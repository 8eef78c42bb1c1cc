#!/usr/bin/env bash
# Installs, from Debian's packages, whatever the build, the tests and the quick
# start need and this machine lacks. Safe to run again: it installs nothing twice.
#   scripts/install-deps.sh             # the build's, the run's and the tests'
#   scripts/install-deps.sh --run       # only what building and running hogwild_train need
#   scripts/install-deps.sh PACKAGE...  # the given packages
set -euo pipefail

# Building the library and the tools, and the quick start's dataset.
run=(
  meson ninja-build pkg-config g++
  libboost-dev libtbb-dev libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libdnnl-dev libgloo-dev libhiredis-dev libssl-dev help2man
  dataset-fashion-mnist
)
# The tests: doctest, a real redis-server, network namespaces (iproute2, unshare),
# the fuzzers (clang and its libFuzzer runtime), the study tools' Python, and the
# Python module (pybind11, for Debian's python3) with what its tests use.
tests=(
  doctest-dev redis-server util-linux iproute2 clang libclang-rt-14-dev
  python3 python3-numpy python3-matplotlib python3-scipy python3-pytest python3-sklearn
  python3-dev pybind11-dev python3-ipykernel python3-jupyter-client
)
if [ "${1:-}" = --run ]; then
  packages=("${run[@]}")
elif [ $# -gt 0 ]; then
  packages=("$@")
else
  packages=("${run[@]}" "${tests[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
