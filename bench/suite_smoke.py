#!/usr/bin/env python3
"""bench/suite.py end to end on its cheapest section (meson test bench_suite).

bench/run.sh is too slow and needs too much (PyTorch, generated data) for CI, so a
section the suite calls but does not define went unnoticed once: the run stopped
after the PyTorch comparison without writing anything. This runs the real suite
with --only kernels into a temporary directory and checks what it writes: the
dense-layer table, its runs in results.json and results.csv.

  suite_smoke.py SUITE BUILD_DIR
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def main():
    suite, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([sys.executable, suite, "--build", build, "--quick", "--only",
                            "kernels", "--out", out], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            sys.exit(f"suite.py exited with {r.returncode}")
        with open(os.path.join(out, "tables.md")) as f:
            tables = f.read()
        if "## Dense layer" not in tables or "SSE2" not in tables:
            sys.exit("tables.md lacks the dense-layer table with its SSE2 row")
        with open(os.path.join(out, "results.json")) as f:
            runs = [x for x in json.load(f)["runs"] if x["section"] == "kernels"]
        with open(os.path.join(out, "results.csv")) as f:
            rows = [x for x in csv.DictReader(f) if x["section"] == "kernels"]
        if not runs or len(rows) != len(runs):
            sys.exit(f"kernel runs: {len(runs)} in results.json, {len(rows)} in results.csv")
        if os.path.exists(os.path.join(out, "data", "rcv1like-500000.train.cache")):
            sys.exit("--only kernels generated the sparse data sets it does not read")
    print("ok: tables.md, results.json and results.csv hold the dense-layer figures")


if __name__ == "__main__":
    main()
