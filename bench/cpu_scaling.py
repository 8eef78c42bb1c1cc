#!/usr/bin/env python3
"""Hogwild's scaling on the RCV1-like set against the ceiling, for a machine lent for
minutes (the 16-core device machine): the scaling section of bench/suite.py cut to
what fits.

  bench/cpu_scaling.py --bin build/src --prepare build/bench/bench_prepare \
      --workers 1,2,4,8,16 --reps 2 --out /tmp/scaling

For each number of workers N, interleaved by repetition: plain hogwild, the default
(--layout auto), hogwild with hot coordinates (--hot-k 4096 --hot-flush 512), with
replicas (--merge-every 4096), --layout replicas and --layout hot, and the ceiling
(N one-worker runs on private copies, started together). Prints a markdown table of median examples/s, the speed-up over one
plain worker, the fraction of the ceiling and the final test accuracy, with the
CPU's name; writes the runs to OUT/scaling.json. Python's standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from bench_memory import cpu_name  # beside this file (the GPU kit carries both)


CONFIGS = {
    "hogwild": ["--layout", "plain"],  # plain Hogwild!, every update to the shared weights
    "auto": [],                        # the default: --layout auto's probe picks
    "hot 4096": ["--hot-k", "4096", "--hot-flush", "512"],
    "replicas 4096": ["--merge-every", "4096"],
    # What the probe would pick, forced at every N: from three workers on their
    # settled features merge as a share (src/modes/hogwild/settled_shares.hpp), and
    # whether 8 and 16 of them keep plain's accuracy here decides if the probe may
    # run past 4 workers (docs/PERFORMANCE.md, "Many writers").
    "layout replicas": ["--layout", "replicas"],
    "layout hot": ["--layout", "hot"],
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, help="folder of hogwild_train")
    p.add_argument("--prepare", required=True, help="path of bench_prepare")
    p.add_argument("--workers", default="1,2,4,8,16")
    p.add_argument("--rows", type=int, default=500000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--out", default="scaling-out")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    workers = [int(w) for w in a.workers.split(",")]
    data = os.path.join(a.out, f"rcv1like-{a.rows}")
    if not os.path.exists(data + ".test.cache"):
        subprocess.run([a.prepare, "--rows", str(a.rows), "--out", data], check=True,
                       stdout=subprocess.DEVNULL)
    train = os.path.join(a.bin, "hogwild_train")
    base = ["--train", data + ".train.cache", "--test", data + ".test.cache", "--epochs",
            str(a.epochs), "--lr", "0.5", "--lr-decay", "0.7", "-q"]
    tmp = tempfile.mkdtemp(prefix="scaling-")

    def start(args, tag):
        s = os.path.join(tmp, f"{tag}.json")
        return subprocess.Popen([train, *base, *args, "--summary", s],
                                stdout=subprocess.DEVNULL), s

    def finish(pairs):
        out = []
        for proc, s in pairs:
            if proc.wait() != 0:
                raise SystemExit(f"run failed: {proc.args}")
            with open(s) as f:
                out.append(json.load(f))
        return out

    runs = []
    t0 = time.time()
    for rep in range(a.reps):
        for n in workers:
            seed = ["--seed", str(rep + 1)]
            for cfg, flags in CONFIGS.items():
                if n == 1 and cfg != "hogwild":
                    continue
                r = finish([start(["--workers", str(n), *flags, *seed], "run")])[0]
                runs.append({"config": cfg, "workers": n, "rep": rep,
                             "examples_per_s": r["samples_per_second"],
                             "test_accuracy": r.get("test_accuracy")})
            if n > 1:
                rs = finish([start(["--workers", "1", *seed], f"c{k}") for k in range(n)])
                runs.append({"config": "ceiling", "workers": n, "rep": rep,
                             "examples_per_s": sum(r["samples_per_second"] for r in rs),
                             "test_accuracy": rs[0].get("test_accuracy")})
            print(f"rep {rep} workers {n}: {time.time() - t0:.0f} s", flush=True)

    def median(cfg, n, key):
        v = [r[key] for r in runs if r["config"] == cfg and r["workers"] == n and r[key] is not None]
        return statistics.median(v) if v else None

    one = median("hogwild", 1, "examples_per_s")
    lines = [f"RCV1-like {a.rows} rows, {a.epochs} epochs, {cpu_name()}, {os.cpu_count()} cores, "
             f"{a.reps} interleaved repetitions, medians", "",
             "| workers | config | examples/s | x one worker | / ceiling | test accuracy |",
             "|---|---|---|---|---|---|"]
    for n in workers:
        ceil = median("ceiling", n, "examples_per_s")
        for cfg in list(CONFIGS) + ["ceiling"]:
            e = median(cfg, n, "examples_per_s")
            if e is None:
                continue
            acc = median(cfg, n, "test_accuracy")
            lines.append(f"| {n} | {cfg} | {e / 1e6:.2f}M | {e / one:.2f}x | "
                         f"{(e / ceil) if ceil else 1:.2f} | "
                         f"{'' if acc is None else f'{acc:.4f}'} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump({"cpu": cpu_name(), "cores": os.cpu_count(), "runs": runs}, f, indent=1)
    with open(os.path.join(a.out, "scaling.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
