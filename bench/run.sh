#!/usr/bin/env bash
# The performance suite in one command (docs/PERFORMANCE.md):
#   bench/run.sh            # full form (about 30-60 minutes on 2 cores)
#   bench/run.sh --quick    # under 5 minutes
#   bench/run.sh --quick --only yardstick,peers --out /tmp/b
# Installs what is missing (install-deps.sh, install-bench-deps.sh; set
# HOGWILD_BENCH_NO_INSTALL=1 to skip), builds the release tree in build/ and runs
# bench/suite.py, which prints markdown tables and writes tables.md, results.json,
# results.csv and PNG plots to bench-out/ (or --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${HOGWILD_BENCH_NO_INSTALL:-0}" != 1 ]; then
  scripts/install-deps.sh
  scripts/install-bench-deps.sh
fi
scripts/build.sh >/dev/null
exec /usr/bin/python3 bench/suite.py --build build "$@"
