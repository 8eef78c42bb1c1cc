#!/usr/bin/python3
"""Two builds' default two-worker runs side by side, with the ceiling: what a
change to the layout probe does to its choices and to the run's speed (issue 36).

    /usr/bin/python3 bench/layout_ab.py --old /tmp/build-old --new build --out /tmp/ab \\
        --reps 60 [--problem SpamAssassin|RCV1-like]

Each repetition runs the old build's `hogwild_train --workers 2`, the new build's,
and the ceiling (two one-worker runs of the new build at once, their examples/s
summed), in an order rotated by one each repetition. Prints each build's median
share of the ceiling and the layouts its probe chose, every choice other than the
usual one (hot on SpamAssassin, replicas on RCV1-like) with its figures, and the
median of new / old within a repetition. The problems and options are
layout_pairs.py's; the CPU is named.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from layout_pairs import problem_options  # noqa: E402  the problems, as layout_pairs.py runs them
from suite import cpu_name  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the old build folder (its src/hogwild_train)")
    ap.add_argument("--new", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--problem", default="SpamAssassin", choices=["RCV1-like", "SpamAssassin"])
    ap.add_argument("--shared-data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                          "shared", "data"))
    a = ap.parse_args()
    if a.reps < 2:
        sys.exit("layout_ab.py: want at least 2 repetitions")
    tools = {name: os.path.join(folder, "src", "hogwild_train") for name, folder in
             (("old", a.old), ("new", a.new))}
    for name, tool in tools.items():
        if not os.access(tool, os.X_OK):
            sys.exit(f"layout_ab.py: no {tool} (--{name})")
    os.makedirs(a.out, exist_ok=True)
    opts = problem_options(a.problem, a.out, os.path.join(a.new, "src", "hogwild_data"), a.shared_data)
    usual = "replicas" if a.problem == "RCV1-like" else "hot"  # what the probe chooses there

    def start(tool, workers, tag):
        s = os.path.join(a.out, f"{tag}.json")
        if os.path.exists(s):
            os.remove(s)
        p = subprocess.Popen([tool, *opts, "--workers", str(workers), "--summary", s],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p, s

    def finish(p, s):
        text = p.communicate()[0]
        if p.returncode != 0 or not os.path.exists(s):
            sys.exit(f"layout_ab.py: hogwild_train failed ({p.returncode}): {text.strip()[-400:]}")
        with open(s) as f:
            return json.load(f)

    rate = {"old": [], "new": [], "ceiling": []}
    chosen = {"old": [], "new": []}
    order = ["old", "new", "ceiling"]
    for r in range(a.reps):
        for name in order[r % 3:] + order[:r % 3]:
            if name == "ceiling":
                both = [start(tools["new"], 1, f"ceiling{i}") for i in range(2)]
                rate["ceiling"].append(sum(finish(*x)["samples_per_second"] for x in both))
                continue
            s = finish(*start(tools[name], 2, name))
            rate[name].append(s["samples_per_second"])
            layout = s.get("layout", {})
            chosen[name].append(layout.get("chosen", ""))
            if layout.get("chosen") != usual:
                print(f"repetition {r + 1}, {name}: {layout.get('chosen')}: {layout.get('why')}", flush=True)

    print(f"{a.problem}, 2 workers, {a.reps} interleaved repetitions, {cpu_name()}")
    print(f"ceiling (2 one-worker runs of the new build at once, summed): median "
          f"{statistics.median(rate['ceiling']) / 1e6:.2f}M examples/s")
    for name in ("old", "new"):
        share = [x / c for x, c in zip(rate[name], rate["ceiling"])]
        counts = ", ".join(f"{k} x{chosen[name].count(k)}" for k in sorted(set(chosen[name])))
        print(f"{name}: {statistics.median(share):.3f} of the ceiling; {counts}")
    ratio = [n / o for n, o in zip(rate["new"], rate["old"])]
    print(f"new / old: median {statistics.median(ratio):.3f}, {sum(x > 1 for x in ratio)} of "
          f"{len(ratio)} above 1")


if __name__ == "__main__":
    main()
