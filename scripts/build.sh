#!/usr/bin/env bash
# Configures (once) and builds the project in build/ (release, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=true
fi
ninja -C build
