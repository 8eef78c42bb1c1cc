#!/usr/bin/python3
"""How far the sampling instruments are from the truth, on one schedule
(docs/EXPERIMENTS.md, issue 35): --mode simulated knows every update's lag and
every lost write exactly, and applies --telemetry's sample of the updates (1 in
telemetry_every, geometric gaps) and --conflicts' sample of the coordinates (the
biases, the top conflict_k features by degree, conflict_k random ones) to the same
schedule (summary: simulation.instruments). This prints, for each set and K, the
exact figures beside the sampled ones, over seeds.

    /usr/bin/python3 bench/simulated_instruments.py --build build --out study [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from simulated_study import prepare  # noqa: E402  the same data sets as the projections
from suite import cpu_name  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="study")
    ap.add_argument("--workers", default="2,16,64,256")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--every", type=int, default=64, help="--telemetry-every of the sample")
    ap.add_argument("--shared-data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                          "shared", "data"))
    ap.add_argument("--rcv-rows", type=int, default=100000)
    ap.add_argument("--users", type=int, default=20000)
    ap.add_argument("--ratings", type=int, default=400000)
    ap.add_argument("--quick", action="store_true", help="one seed, K = 2 and 64, small sets")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.workers, a.rcv_rows, a.users, a.ratings, a.epochs = 1, "2,64", 20000, 4000, 40000, 1
    tools = {"train": os.path.join(a.build, "src", "hogwild_train"),
             "data": os.path.join(a.build, "src", "hogwild_data")}
    sets = prepare(a, tools)
    summary = os.path.join(a.out, "instruments.json")
    rows = []
    print(f"the sampling instruments against the exact figures on one simulated schedule, "
          f"{cpu_name()}, {a.epochs} epoch(s), {a.seeds} seed(s), telemetry 1 in {a.every}\n")
    print("| set | K | lag mean: exact / sampled | lag p99: exact / sampled | sampled updates | "
          "conflicts a write: exact (all writes) / sampled coordinates | sampled coordinates |")
    print("|---|---|---|---|---|---|---|")
    for name, d in sets.items():
        for k in [int(x) for x in a.workers.split(",")]:
            runs = []
            for seed in range(1, a.seeds + 1):
                cmd = [tools["train"], "--train", d["train"], "--model", d["model"], "--lr", str(d["lr"]),
                       "--mode", "simulated", "--workers", str(k), "--epochs", str(a.epochs),
                       "--seed", str(seed), "--telemetry-every", str(a.every), "-q",
                       "--summary", summary]
                for key, value in d["extra"].items():
                    cmd += [f"--{key}", str(value)]
                subprocess.run(cmd, check=True, capture_output=True)
                with open(summary) as f:
                    runs.append(json.load(f))

            def med(f):
                return statistics.median(f(r) for r in runs)
            ins = lambda key: med(lambda r: r["simulation"]["instruments"][key])  # noqa: E731
            exact_rate = med(lambda r: r["simulation"]["lost_writes"] / max(r["simulation"]["writes"], 1))
            sampled_rate = med(lambda r: r["simulation"]["instruments"]["conflict_conflicts"] /
                               max(r["simulation"]["instruments"]["conflict_writes"], 1))
            row = dict(set=name, k=k, lag_mean=med(lambda r: r["staleness"]["lag"]["mean"]),
                       sampled_lag_mean=ins("sampled_lag_mean"), lag_p99=med(lambda r: r["staleness"]["lag"]["p99"]),
                       sampled_lag_p99=ins("sampled_lag_p99"), sampled_updates=ins("sampled_updates"),
                       conflict_rate=exact_rate, sampled_conflict_rate=sampled_rate,
                       coordinates=ins("conflict_coordinates"))
            rows.append(row)
            print(f"| {name} | {k} | {row['lag_mean']:.2f} / {row['sampled_lag_mean']:.2f} | "
                  f"{row['lag_p99']:.0f} / {row['sampled_lag_p99']:.0f} | {row['sampled_updates']:.0f} | "
                  f"{100 * exact_rate:.3f} % / {100 * sampled_rate:.3f} % | {row['coordinates']:.0f} |",
                  flush=True)
    with open(os.path.join(a.out, "instruments-table.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
