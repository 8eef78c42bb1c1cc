#!/usr/bin/env bash
# Installs, from Debian's packages, what bench/run.sh needs beyond the build:
# PyTorch for the side-by-side comparison (bench/compare/), OpenBLAS so that
# PyTorch's dense layers are not run on the reference BLAS (13x slower, which
# would flatter us), matplotlib for the plots and linux-perf for the profile.
# Kept apart from install-deps.sh so CI stays lean. Safe to run again.
set -euo pipefail

packages=(python3-torch python3-matplotlib libopenblas0-pthread python3-numpy)

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
