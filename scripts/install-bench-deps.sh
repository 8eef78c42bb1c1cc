#!/usr/bin/env bash
# Installs, from Debian's packages, what bench/run.sh needs beyond the build:
# PyTorch for the side-by-side comparison (bench/compare/), OpenBLAS so that
# PyTorch's dense layers are not run on the reference BLAS (13x slower, which
# would flatter us) and matplotlib for the plots; oneDNN and libxsmm for
# bench_matmul_libs (our MLP products against them, docs/PERFORMANCE.md).
# Kept apart from install-deps.sh so CI stays lean. Safe to run again.
set -euo pipefail
exec "$(dirname "$0")/install-deps.sh" python3-torch python3-matplotlib libopenblas0-pthread \
  python3-numpy libdnnl-dev libxsmm-dev
