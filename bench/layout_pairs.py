#!/usr/bin/python3
"""Configurations of two-worker hogwild side by side in many interleaved
repetitions, each against the ceiling measured in the same repetition (two
one-worker runs at once, their examples/s summed) and against each other, pair by
pair: the instrument for differences of a few per cent on this VM, whose phases
move a single run's rate by far more (issue 36: the probe's own cost, auto against
forced replicas).

    /usr/bin/python3 bench/layout_pairs.py --build build --out /tmp/pairs --reps 30 \\
        auto= replicas='--layout replicas' [--problem RCV1-like|SpamAssassin]

Each NAME=OPTIONS adds a configuration (OPTIONS: hogwild_train's, after --workers N;
--workers 1 compares layouts with no contention, the ceiling then one plain run).
Every repetition runs each configuration once and the ceiling once, in an order
rotated by one each repetition. Prints, for each configuration, the median of its
per-repetition share of the ceiling, the layouts chosen, the final F (median; a
replica's merges or a hot window's flushes), the
test losses' range; then for each two configurations the median and quartiles of their
per-repetition ratio of examples/s. The CPU is named.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from suite import cpu_name  # noqa: E402


def quartiles(values):
    """The first and third quartiles, inside the values (few repetitions included)."""
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def problem_options(problem, out, data_tool, shared_data):
    """hogwild_train's options for `problem` (RCV1-like or SpamAssassin), its caches
    made in `out` where missing; exit 77 where SpamAssassin's files are not in
    `shared_data`, as the *_shared_data tests skip."""
    spam = os.path.join(shared_data, "spamassassin", "spam.train.svm.gz")
    if problem == "SpamAssassin" and not os.path.exists(spam):
        print(f"skipped: {spam} is missing (../shared/data)")
        sys.exit(77)
    if problem == "RCV1-like":
        base = os.path.join(out, "rcv1like-500000")
        if not os.path.exists(base + ".test.cache"):
            subprocess.run([data_tool, "generate", "--rows", "500000", "--features", "47236", "--nnz-per-row",
                            "75", "--zipf", "1", "--noise", "0.03", "--seed", "3", "--out",
                            base + ".train.cache", "--test-out", base + ".test.cache"],
                           check=True, stdout=subprocess.DEVNULL)
        opts = ["--model", "logistic", "--lr", "0.5", "--lr-decay", "0.7", "--epochs", "3"]
    else:
        base = os.path.join(out, "spam")
        for part in ("train", "test"):
            if not os.path.exists(f"{base}.{part}.cache"):
                subprocess.run([data_tool, "convert", os.path.join(shared_data, "spamassassin",
                                                                   f"spam.{part}.svm.gz"),
                                "--out", f"{base}.{part}.cache"], check=True, stdout=subprocess.DEVNULL)
        opts = ["--model", "logistic", "--lr", "0.5", "--lr-decay", "0.97", "--epochs", "60"]
    return ["--train", base + ".train.cache", "--test", base + ".test.cache", *opts, "-q"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--problem", default="RCV1-like", choices=["RCV1-like", "SpamAssassin"])
    ap.add_argument("--workers", type=int, default=2, help="of each configuration's runs (the ceiling: "
                    "that many one-worker runs at once)")
    ap.add_argument("--shared-data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                          "shared", "data"))
    ap.add_argument("configs", nargs="+", metavar="NAME=OPTIONS")
    a = ap.parse_args()
    configs = {}
    for c in a.configs:
        name, eq, opts = c.partition("=")
        if not eq or not name or name == "ceiling" or name in configs:
            sys.exit(f"layout_pairs.py: {c!r}: want NAME=OPTIONS, each NAME once and not 'ceiling'")
        configs[name] = shlex.split(opts)
    if len(configs) < 1 or a.reps < 2 or a.workers < 1:
        sys.exit("layout_pairs.py: want a configuration, at least 2 repetitions and 1 worker")
    os.makedirs(a.out, exist_ok=True)
    train_tool = os.path.join(a.build, "src", "hogwild_train")
    opts = problem_options(a.problem, a.out, os.path.join(a.build, "src", "hogwild_data"), a.shared_data)

    started = []

    def start(extra, tag):
        s = os.path.join(a.out, f"{tag}.json")
        if os.path.exists(s):  # never the last run's figures for this one's
            os.remove(s)
        p = subprocess.Popen([train_tool, *opts, *extra, "--summary", s], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        started.append(p)
        return p, s

    def finish(p, s):
        text = p.communicate()[0]
        if p.returncode != 0 or not os.path.exists(s):
            for other in started:  # the other runs of a ceiling
                if other.poll() is None:
                    other.kill()
            sys.exit(f"layout_pairs.py: hogwild_train failed ({p.returncode}): {text.strip()[-400:]}")
        with open(s) as f:
            return json.load(f)

    runs = {name: [] for name in configs}
    ceiling = []
    order = [*configs, "ceiling"]
    for r in range(a.reps):
        for name in order[r % len(order):] + order[:r % len(order)]:
            if name == "ceiling":
                both = [start(["--workers", "1"], f"ceiling{i}") for i in range(a.workers)]
                ceiling.append(sum(finish(*x)["samples_per_second"] for x in both))
            else:
                runs[name].append(finish(*start(["--workers", str(a.workers), *configs[name]], "run")))

    print(f"{a.problem}, {a.workers} worker(s), {a.reps} interleaved repetitions, {cpu_name()}")
    print(f"ceiling ({a.workers} one-worker run(s) at once, summed): median {statistics.median(ceiling) / 1e6:.2f}M examples/s")
    for name, rs in runs.items():
        share = [x["samples_per_second"] / c for x, c in zip(rs, ceiling)]
        chosen = [x.get("layout", {}).get("chosen", "") for x in rs]
        counts = ", ".join(f"{k} x{chosen.count(k)}" for k in sorted(set(chosen)))
        losses = sorted(x["test_loss"] if x.get("test_loss") is not None else float("nan") for x in rs)
        # F: the replicas' merge interval, or the hot window's flush interval
        every = [x.get("merge_every_final", 0) or x.get("flush_every_final", 0) for x in rs]
        print(f"{name}: {statistics.median(share):.3f} of the ceiling (quartiles "
              f"{' - '.join(f'{q:.3f}' for q in quartiles(share))}); {counts}; "
              f"F at the end median {statistics.median(every):.0f}; test loss {losses[0]:.4f}-{losses[-1]:.4f}")
    names = list(runs)
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            pr = [p["samples_per_second"] / q["samples_per_second"] for p, q in zip(runs[x], runs[y])]
            q = quartiles(pr)
            print(f"{x} / {y}: median {statistics.median(pr):.3f}, quartiles {q[0]:.3f}-{q[1]:.3f}, "
                  f"{sum(v > 1 for v in pr)} of {len(pr)} above 1")


if __name__ == "__main__":
    main()
