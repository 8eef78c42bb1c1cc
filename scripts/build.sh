#!/usr/bin/env bash
# Configures (once) and builds the project in build/ (release, warnings as errors):
# the library, the tools, the tests, benchmarks and examples, and the GPU half where
# the CUDA toolkit is. A build/ that the quick start configured lean (no tests, no
# GPU code) is configured whole first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=true
elif grep -q '"name": "tests", "value": "disabled"' build/meson-info/intro-buildoptions.json 2>/dev/null; then
  meson configure build -Dtests=auto -Dcuda=auto
fi
ninja -C build
