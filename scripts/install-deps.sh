#!/usr/bin/env bash
# Installs, from Debian's packages, whatever the build, the tests and the quick
# start need and this machine lacks. Safe to run again: it installs nothing twice.
#   scripts/install-deps.sh [PACKAGE...]   # the given packages instead of the build's
set -euo pipefail

packages=("$@")
[ $# -gt 0 ] || packages=(
  meson ninja-build pkg-config g++
  clang libclang-rt-14-dev util-linux iproute2
  libboost1.81-dev libtbb-dev doctest-dev libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libdnnl-dev
  libgloo-dev libhiredis-dev redis-server
  python3 python3-matplotlib
  dataset-fashion-mnist
)

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
