#!/usr/bin/python3
"""The simulated studies of docs/EXPERIMENTS.md ("Projections"): K virtual workers
(--mode simulated) on the generated RCV1-like set, SpamAssassin and the generated
Netflix-like ratings, for each access (hogwild, atomic, lock, striped at 64 stripes),
several seeds, through
hogwild_sweep; hogwild_plot draws each sweep's figures. Prints, per data set, its
Hogwild! statistics (hogwild_data stats: Omega, Delta, rho bounds, the conflict
degree) and one table: per K, in simulated time, the examples per second and the
speed-up to the target loss against one simulated worker (hogwild), the examples
to the target f* + 0.1 (f0 - f*) for each access (statistical efficiency), the exact lag's p99 and the
lost mass per update (hogwild).

With --cost-model FILE (bench/calibrate_simulator.py's output) every simulated run
uses those costs instead of the built-in ones.

    bench/simulated_study.py --build build --out /tmp/study [--quick] [--cost-model FILE]
"""
import argparse
import json
import os
import subprocess
import sys

from suite import cpu_name  # bench/suite.py: the model and its vector units

ACCESSES = ("hogwild", "atomic", "lock", "striped")  # striped: striped mode's 64 stripes


def run(args, **kw):
    return subprocess.run([str(a) for a in args], check=True, **kw)


def prepare(a, tools):
    """The data sets: name -> train, test, model options, epochs, lr."""
    data = os.path.join(a.out, "data")
    os.makedirs(data, exist_ok=True)
    sets = {}
    rcv = os.path.join(data, "rcv1like")
    if not os.path.exists(rcv + ".test.cache"):
        run([tools["data"], "generate", "--rows", a.rcv_rows, "--features", 47236, "--nnz-per-row", 75,
             "--zipf", 1, "--noise", 0.03, "--seed", 3, "--out", rcv + ".train.cache", "--test-out",
             rcv + ".test.cache"], stdout=subprocess.DEVNULL)
    sets["RCV1-like"] = dict(train=rcv + ".train.cache", test=rcv + ".test.cache", model="logistic",
                             lr=0.5, extra={"lr-decay": 0.8}, epochs=5, stats=[])
    spam_src = os.path.join(a.shared_data, "spamassassin")
    if os.path.exists(os.path.join(spam_src, "spam.train.svm.gz")):
        spam = os.path.join(data, "spam")
        for part in ("train", "test"):
            if not os.path.exists(f"{spam}.{part}.cache"):
                run([tools["data"], "convert", os.path.join(spam_src, f"spam.{part}.svm.gz"), "--out",
                     f"{spam}.{part}.cache"], stdout=subprocess.DEVNULL)
        sets["SpamAssassin"] = dict(train=spam + ".train.cache", test=spam + ".test.cache",
                                    model="logistic", lr=0.5, extra={"lr-decay": 0.97}, epochs=5,
                                    stats=[])
    else:
        print(f"(no SpamAssassin under {a.shared_data}: its study is left out)")
    ratings = os.path.join(data, "ratings")
    if not os.path.exists(ratings + ".test.cache"):
        run([tools["data"], "generate", "--kind", "ratings", "--users", a.users, "--items",
             a.users // 4, "--rank", 10, "--ratings", a.ratings, "--out", ratings + ".train.cache",
             "--test-out", ratings + ".test.cache"], stdout=subprocess.DEVNULL)
    sets["Netflix-like ratings"] = dict(train=ratings + ".train.cache", test=ratings + ".test.cache",
                                        model="mf", lr=0.05, extra={"lr-decay": 0.9, "rank": 10,
                                                                    "l2": 0.02},
                                        epochs=10, stats=["--model", "mf", "--rank", "10"])
    return sets


def stats(tools, d):
    out = subprocess.run([tools["data"], "stats", "--train", d["train"], "--rho", "bounds", "--json", "-",
                          *d["stats"]], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared-data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--quick", action="store_true", help="K up to 64, 2 seeds, smaller sets")
    ap.add_argument("--eps", type=float, default=0.1, help="the target: f* + eps (f0 - f*)")
    ap.add_argument("--cost-model", help="a --cost-model file for every run (default: the built-in costs)")
    a = ap.parse_args()
    workers = "1,4,16,64" if a.quick else "1,4,16,64,256"
    seeds = 2 if a.quick else 3
    a.rcv_rows = 10000 if a.quick else 40000
    a.users, a.ratings = (1000, 50000) if a.quick else (2000, 100000)  # 50 ratings a user
    tools = {t: os.path.join(a.build, "src", f"hogwild_{t}") for t in ("data", "train", "sweep", "plot")}
    if a.cost_model:
        a.cost_model = os.path.abspath(a.cost_model)
        with open(a.cost_model) as f:
            costs = f"the cost model {a.cost_model}: {json.load(f)}"
    else:
        costs = "the built-in cost model"
    print(f"# simulated studies on {cpu_name()}, {os.cpu_count()} cores; K = {workers}, "
          f"{seeds} seeds, access {', '.join(ACCESSES)}; {costs}")
    for name, d in prepare(a, tools).items():
        st = stats(tools, d)
        folder = os.path.join(a.out, f"{d['model']}-{name.split()[0].lower()}")
        modes = ",".join("simulated" if x == "hogwild" else f"simulated-{x}" for x in ACCESSES)
        cmd = [tools["sweep"], "--train", d["train"], "--test", d["test"], "--model", d["model"],
               "--mode", modes, "--workers", workers, "--lr", d["lr"], "--seeds", seeds,
               "--epochs", d["epochs"], "--eps", a.eps, "--hogwild-train", tools["train"],
               "--out", folder]
        for k, v in d["extra"].items():
            cmd += ["--train-option", f"{k}={v}"]
        if a.cost_model:
            cmd += ["--cost-model", a.cost_model]
        run(cmd, stdout=subprocess.DEVNULL)
        run([tools["plot"], folder], stdout=subprocess.DEVNULL)
        with open(os.path.join(folder, "results.json")) as f:
            rows = json.load(f)["rows"]
        results = {x: {r["workers"]: r for r in rows
                       if r["mode"] == ("simulated" if x == "hogwild" else f"simulated-{x}")}
                   for x in ACCESSES}
        print(f"\n## {name}: {st['updates']} updates, Omega {st['omega']} (mean {st['mean_update_size']:.1f}), "
              f"Delta {st['delta']:.3f} ({st['busiest']}), rho in [{st['rho_lower']:.3f}, "
              f"{st['rho_upper']:.3f}], P(two updates share a coordinate) {st['p_conflict']:.3f}, "
              f"conflict degree {st['conflict_degree']:.0f}")
        print("| K | hogwild: examples/s (simulated) | time speed-up to target | examples to target: "
              "hogwild | atomic | lock | striped | lag p99 | lost mass / update | final loss (hogwild) |")
        print("|---|---|---|---|---|---|---|---|---|---|")

        def g(access, k, key, spec):
            r = results[access].get(k)
            v = r and r.get(key)
            return "—" if v is None else format(v, spec)
        for k in sorted(results["hogwild"]):
            print(f"| {k} | {g('hogwild', k, 'throughput', '.3g')} | {g('hogwild', k, 'time_speedup', '.2f')} | "
                  f"{g('hogwild', k, 'updates_to_target', '.3g')} | {g('atomic', k, 'updates_to_target', '.3g')} | "
                  f"{g('lock', k, 'updates_to_target', '.3g')} | {g('striped', k, 'updates_to_target', '.3g')} | "
                  f"{g('hogwild', k, 'staleness_lag_p99', '.3g')} | "
                  f"{g('hogwild', k, 'lost_mass_mean', '.3g')} | {g('hogwild', k, 'final_loss', '.4f')} |")
        print(f"(figures: {folder}/plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
