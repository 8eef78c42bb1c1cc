#!/usr/bin/python3
"""Two builds of hogwild_train side by side: does a change make any mode slower?

  bench/compare_builds.py --old /path/to/old/build --new build [--reps 5]

Runs the quick form's configurations (every mode, the replica and hot-window
options of hogwild, 1 and 2 workers) on a generated RCV1-like set, and on
SpamAssassin where ../shared/data has it, with each build's hogwild_train. The
repetitions are interleaved, and within each one the two builds run back to back
in alternating order (old first, then new first), so that a drift of the machine
falls on both. Each figure is examples/s from the run's --summary; the ratio of a
configuration is the median over repetitions of new/old within a repetition, and
its band the smallest and largest of those (docs/PERFORMANCE.md's rules). A ratio
below 0.95 whose band lies wholly below 1 is flagged.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_memory import cpu_name

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIGS = [
    ("serial", ["--mode", "serial"]),
    ("hogwild x1", ["--mode", "hogwild", "--workers", "1"]),
    ("hogwild x2", ["--mode", "hogwild", "--workers", "2"]),
    ("atomic x2", ["--mode", "atomic", "--workers", "2"]),
    ("lock x2", ["--mode", "lock", "--workers", "2"]),
    ("striped x2", ["--mode", "striped", "--workers", "2"]),
    ("hogwild x2 merge", ["--mode", "hogwild", "--workers", "2", "--merge-every", "4096"]),
    ("hogwild x2 hot-k", ["--mode", "hogwild", "--workers", "2", "--hot-k", "4096",
                          "--hot-flush", "512"]),
    ("ddp x2 b32", ["--mode", "ddp", "--workers", "2", "--batch", "32"]),
    ("dp x2 b32", ["--mode", "dp", "--workers", "2", "--batch", "32"]),
    ("ps x2", ["--mode", "ps", "--workers", "2"]),
]


def train(build, data, args, work):
    summary = os.path.join(work, "summary.json")
    cmd = [os.path.join(build, "src", "hogwild_train"), "--train", data["train"],
           "--test", data["test"], "--epochs", str(data["epochs"]), "--lr", str(data["lr"]),
           "--summary", summary] + args
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    with open(summary) as f:
        return json.load(f)["samples_per_second"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the build folder before the change")
    p.add_argument("--new", default=os.path.join(ROOT, "build"), help="the build folder after it")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rows", type=int, default=200000, help="RCV1-like training rows")
    p.add_argument("--shared-data", default=os.environ.get(
        "HOGWILD_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data")))
    p.add_argument("--only", default="", help="comma-separated configuration names")
    p.add_argument("--scale", type=float, default=1, help="epochs times this (longer runs)")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="hogwild-compare-")
    gen = os.path.join(a.new, "src", "hogwild_data")
    sets = {}
    rcv = os.path.join(work, "rcv1like")
    for part, rows, seed in (("train", a.rows, 1), ("test", a.rows // 10, 2)):
        subprocess.run([gen, "generate", "--rows", str(rows), "--features", "47236",
                        "--nnz-per-row", "75", "--seed", str(seed), "--out",
                        f"{rcv}.{part}.cache"], check=True, stdout=subprocess.DEVNULL)
    sets["rcv1like"] = {"train": rcv + ".train.cache", "test": rcv + ".test.cache",
                        "epochs": max(1, round(2 * a.scale)), "lr": 0.5}
    spam = os.path.join(a.shared_data, "spamassassin")
    if os.path.exists(f"{spam}/spam.train.svm.gz"):
        for part in ("train", "test"):
            subprocess.run([gen, "convert", f"{spam}/spam.{part}.svm.gz", "--out",
                            os.path.join(work, f"spam.{part}.cache")], check=True,
                           stdout=subprocess.DEVNULL)
        sets["spam"] = {"train": os.path.join(work, "spam.train.cache"),
                        "test": os.path.join(work, "spam.test.cache"),
                        "epochs": max(1, round(40 * a.scale)), "lr": 0.5}
    only = set(filter(None, a.only.split(",")))
    configs = [(n, c) for n, c in CONFIGS if not only or n in only]
    runs = {}  # (set, config) -> [(old, new)] per repetition
    print(f"old {a.old} against new {a.new}: {cpu_name()}, {os.cpu_count()} cores, "
          f"{a.reps} interleaved repetitions", flush=True)
    for rep in range(a.reps):
        for set_name, data in sets.items():
            for name, args in configs:
                order = ("old", "new") if rep % 2 == 0 else ("new", "old")
                got = {which: train(a.old if which == "old" else a.new, data, args, work)
                       for which in order}
                runs.setdefault((set_name, name), []).append((got["old"], got["new"]))
        print(f"repetition {rep + 1} of {a.reps} done", flush=True)
    print(f"\n| data | configuration | old examples/s | new examples/s | new/old (median) | "
          f"band (min-max) |")
    print("|---|---|---|---|---|---|")
    slower = []
    for (set_name, name), pairs in runs.items():
        ratios = [n / o for o, n in pairs]
        r = statistics.median(ratios)
        flag = r < 0.95 and max(ratios) < 1
        if flag:
            slower.append(f"{set_name} {name}")
        print(f"| {set_name} | {name} | {statistics.median(o for o, _ in pairs):,.0f} | "
              f"{statistics.median(n for _, n in pairs):,.0f} | {r:.3f}{' **slower**' if flag else ''} | "
              f"{min(ratios):.3f}-{max(ratios):.3f} |")
    print(f"\n{len(slower)} configuration(s) slower than 0.95x beyond their band"
          + (": " + ", ".join(slower) if slower else ""))
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
