#!/usr/bin/python3
"""The simulator's own speed (--mode simulated, docs/EXPERIMENTS.md): wall-clock
examples/s of K virtual workers against the serial trainer on the same rows, model
and options, repetitions interleaved (../shared/BENCHMARKING.md). Each side's
figure is its summary's samples_per_second (the training's wall time, not the
simulated clock). The issue's target: >= 0.3x serial at K = 64 on sparse logistic
regression.

    /usr/bin/python3 bench/bench_simulator.py --build build [--quick] [--data FILE]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from calibrate_simulator import cache, train  # noqa: E402  the runs, as the calibration makes them
from suite import cpu_name  # noqa: E402  bench/suite.py: the model and its vector units


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                   "spamassassin", "spam.train.svm.gz"))
    ap.add_argument("--workers", default="1,2,16,64,256,1024")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="two repetitions of 2 epochs, K = 1 and 64")
    a = ap.parse_args()
    if not os.path.exists(a.data):  # no ../shared beside this checkout: skipped, as the
        print(f"skipped: {a.data} is missing (../shared/data)")  # *_shared_data tests
        sys.exit(77)
    if a.quick:
        a.reps, a.epochs, a.workers = 2, 2, "1,64"
    tool = os.path.join(a.build, "src", "hogwild_train")
    ks = [int(k) for k in a.workers.split(",")]
    configs = [("serial", ["--mode", "serial"])]
    for k in ks:
        configs.append((f"K={k} hogwild", ["--mode", "simulated", "--workers", str(k)]))
    configs.append((f"K={ks[-1]} atomic", ["--mode", "simulated", "--workers", str(ks[-1]),
                                           "--simulate-access", "atomic"]))
    rates = {name: [] for name, _ in configs}
    lost = {}
    with tempfile.TemporaryDirectory() as tmp:
        # A cache of the rows first, so that no run parses text.
        rows = cache(os.path.join(a.build, "src", "hogwild_data"), a.data,
                     os.path.join(tmp, "rows.cache"))
        for _ in range(a.reps):  # interleaved
            for name, extra in configs:
                s = train(tool, rows, [*extra, "--epochs", str(a.epochs)], tmp)
                rates[name].append(s["samples_per_second"])
                if "simulation" in s:
                    lost[name] = (s["simulation"]["lost_writes"], s["staleness"]["lag"]["mean"])
    serial = statistics.median(rates["serial"])
    print(f"{os.path.basename(a.data)}, logistic, {a.epochs} epochs, {cpu_name()}, "
          f"{a.reps} interleaved repetitions, medians")
    print()
    print("| run | examples/s (wall) | x serial | lag mean | lost writes |")
    print("|---|---|---|---|---|")
    for name, _ in configs:
        m = statistics.median(rates[name])
        l, lag = lost.get(name, ("", ""))
        lag = f"{lag:.1f}" if lag != "" else ""
        print(f"| {name} | {m / 1e3:.0f}k | {m / serial:.3f}x | {lag} | {l} |")


if __name__ == "__main__":
    main()
