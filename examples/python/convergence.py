#!/usr/bin/env python3
"""Test loss against wall time: Hogwild! (lock-free), one lock around each
mini-batch, and synchronous data parallel (ddp), at 1, 2 and 4 workers, over
several seeds, on a generated sparse binary problem.

  PYTHONPATH=build/python /usr/bin/python3 examples/python/convergence.py --out convergence.png
  PYTHONPATH=build/python /usr/bin/python3 examples/python/convergence.py --light   # CI: seconds

The problem is RCV1-shaped: each row holds about --nnz features drawn from a Zipf
law over --features columns (a few features are in most rows: the coordinates the
workers collide on), values 1 scaled to a unit-norm row, and the label is the sign
of a planted linear model's score with --noise of the labels flipped (the planted
model's own test loss, the entropy of the noise, is the floor drawn). The figure
has one panel per mode and one line per worker count: the mean over the seeds of
the test loss (each run's evaluations interpolated onto a common time grid), with
the band between the lowest and the highest seed. The table gives each setting's
final test loss (mean ± sd over the seeds) and training speed.

What to keep in mind when reading it:
- At one worker the three modes take serial mode's steps (ddp up to the order of
  the floating-point additions); they differ only in what each step costs.
- `--batch` is per worker. Hogwild! and lock apply each worker's mini-batch as it
  comes; ddp averages the W workers' gradients into one step of W x batch rows, so
  its --lr is scaled by W (linear scaling, docs/MODES.md) to take about as long a
  step per example as the others.
- `time` is seconds of training when the evaluated weights were copied
  (docs/CLI.md, --metrics). Timed evaluations (--eval-every) run in the parent
  alongside the workers: on a machine with few cores they take some of the
  workers' time, as does a worker count above the number of cores.
--light asserts that every run's final test loss is finite and below log 2 (the
loss of predicting 0.5 for every row) and that every run gave at least 3 points,
and exits non-zero otherwise.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import hogwild  # noqa: E402

MODES = ("hogwild", "lock", "ddp")


def cpu_name():
    """The CPU's model, as every figure of the project names it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def make_problem(rows, features, nnz, noise, seed):
    """A sparse binary problem: (X, y) as float32 scipy CSR and float32 0/1 labels.

    Feature j is drawn with probability proportional to 1 / (j + 1): at 4096
    features, feature 0 is in about 9 rows of 10 and the rarest in a few dozen of
    100k. Duplicates in a row are merged, and each row is scaled to unit norm (as
    RCV1's tf-idf rows are)."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, features + 1)
    popularity /= popularity.sum()
    per_row = rng.poisson(nnz - 1, size=rows) + 1
    cols = rng.choice(features, size=per_row.sum(), p=popularity).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
    X = sp.csr_matrix((np.ones(cols.size, np.float32), cols, indptr), shape=(rows, features))
    X.sum_duplicates()  # also sorts each row's columns, as hogwild wants them
    X.data[:] = 1.0
    X = sp.diags(1.0 / np.sqrt(np.diff(X.indptr))) @ X
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()

    w = rng.normal(size=features)  # the planted model
    y = (X @ w > 0).astype(np.float32)
    flip = rng.random(rows) < noise
    y[flip] = 1.0 - y[flip]
    return X, y


def run(train, test, mode, workers, seed, a):
    lr = a.lr * workers if mode == "ddp" else a.lr  # ddp: linear scaling (see above)
    r = hogwild.train(train, test=test, model="logistic", mode=mode, workers=workers,
                      epochs=a.epochs, batch=a.batch, lr=lr, lr_decay=a.lr_decay, seed=seed,
                      eval_every=a.eval_every)
    t = np.array([m["time"] for m in r.metrics])
    loss = np.array([m["test_loss"] for m in r.metrics])
    return {"mode": mode, "workers": workers, "seed": seed, "time": t, "loss": loss,
            "final_loss": r.summary["test_loss"],
            "examples_per_s": r.summary["samples_per_second"]}


def seed_band(runs, points=200):
    """Mean, lowest and highest loss over the seeds on a common time grid: from the
    latest first evaluation to the earliest last one, so no run is extrapolated."""
    start = max(r["time"][0] for r in runs)
    end = min(r["time"][-1] for r in runs)
    grid = np.geomspace(start, end, points) if end > start else np.array([start])
    curves = np.array([np.interp(grid, r["time"], r["loss"]) for r in runs])
    return grid, curves.mean(axis=0), curves.min(axis=0), curves.max(axis=0)


def plot(results, a, title, out):
    # The planted model's own expected loss: it is right with probability 1 - noise.
    q = a.noise
    floor = -(q * math.log(q) + (1 - q) * math.log(1 - q)) if 0 < q < 1 else 0.0
    fig, axes = plt.subplots(1, len(MODES), figsize=(5 * len(MODES), 4.2), sharex=True,
                             sharey=True, constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, mode in zip(axes, MODES):
        for k, workers in enumerate(a.workers):
            runs = [r for r in results if r["mode"] == mode and r["workers"] == workers]
            grid, mean, low, high = seed_band(runs)
            ax.plot(grid, mean, color=colors[k], label=f"{workers} worker{'s' * (workers > 1)}")
            ax.fill_between(grid, low, high, color=colors[k], alpha=0.25, linewidth=0)
        first = ax is axes[0]  # the reference lines are named once
        ax.axhline(math.log(2), color="grey", linestyle=":", linewidth=1,
                   label="predicting 0.5" if first else None)
        ax.axhline(floor, color="grey", linestyle="--", linewidth=1,
                   label="the planted model" if first else None)
        ax.set(title=mode, xscale="log", xlabel="wall time (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("test log loss (band: min-max over seeds)")
    fig.suptitle(title)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def table(results, a):
    rows = [f"{'mode':8} {'workers':>7} {'final test loss':>17} {'examples/s':>11} "
            f"{'vs ' + str(a.workers[0]) + ' worker':>11}"]
    for mode in MODES:
        one = None
        for workers in a.workers:
            runs = [r for r in results if r["mode"] == mode and r["workers"] == workers]
            loss = np.array([r["final_loss"] for r in runs])
            speed = float(np.mean([r["examples_per_s"] for r in runs]))
            one = speed if workers == a.workers[0] else one
            rows.append(f"{mode:8} {workers:>7} {loss.mean():>9.4f} ± {loss.std():.4f} "
                        f"{speed / 1e6:>10.2f}M {speed / one:>10.2f}x")
    return "\n".join(rows)


def check(results):
    """--light's assertions: every run learnt something and has a curve."""
    failures = []
    for r in results:
        name = f"{r['mode']} workers={r['workers']} seed={r['seed']}"
        if not (math.isfinite(r["final_loss"]) and r["final_loss"] < math.log(2)):
            failures.append(f"{name}: final test loss {r['final_loss']} is not below log 2")
        if len(r["time"]) < 3:
            failures.append(f"{name}: {len(r['time'])} evaluation(s), fewer than 3")
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--out", default="convergence.png", help="the figure (PNG)")
    p.add_argument("--light", action="store_true",
                   help="a tiny form for CI (20k rows, 3 epochs, 2 seeds, 1 and 2 workers) "
                        "that checks every run converged")
    p.add_argument("--rows", type=int, default=100_000, help="rows, a fifth of them the test set")
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--nnz", type=float, default=20, help="mean features per row")
    p.add_argument("--noise", type=float, default=0.05, help="fraction of labels flipped")
    p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    p.add_argument("--seeds", type=int, default=3, help="seeds 1..N for each setting")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=1,
                   help="mini-batch per worker (1: classic Hogwild!)")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--lr-decay", type=float, default=0.8, help="lr <- lr * this after each epoch")
    p.add_argument("--eval-every", type=float, default=0.02,
                   help="seconds between timed evaluations (besides one per epoch)")
    a = p.parse_args()
    if a.light:
        a.rows, a.epochs, a.seeds, a.workers, a.eval_every = 20_000, 3, 2, "1,2", 0.01
    a.workers = [int(w) for w in a.workers.split(",")]

    X, y = make_problem(a.rows, a.features, a.nnz, a.noise, seed=0)
    n_test = a.rows // 5
    train, test = (X[n_test:], y[n_test:]), (X[:n_test], y[:n_test])
    cores = os.cpu_count()
    print(f"{a.rows - n_test} training rows, {n_test} test rows, {a.features} features, "
          f"{X.nnz / a.rows:.1f} per row; {cpu_name()}, {cores} cores", flush=True)
    if max(a.workers) > cores:
        print(f"note: {max(a.workers)} workers on {cores} cores: the workers share cores "
              "(ddp's barriers suffer most)", flush=True)

    start = time.time()
    results = []
    for seed in range(1, a.seeds + 1):  # seeds outermost: a drift in the machine spreads evenly
        for mode in MODES:
            for workers in a.workers:
                results.append(run(train, test, mode, workers, seed, a))
    print(f"{len(results)} runs in {time.time() - start:.1f} s\n")

    title = (f"Logistic regression, {a.rows - n_test} Zipf-sparse rows, {a.epochs} epochs, "
             f"batch {a.batch}, {a.seeds} seed{'s' * (a.seeds > 1)}\n{cpu_name()}, {cores} cores")
    plot(results, a, title, a.out)
    print(table(results, a))
    print(f"\nfigure: {a.out}")

    if a.light:
        failures = check(results)
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        if failures:
            return 1
        print(f"ok: all {len(results)} runs below log 2 = {math.log(2):.4f}, each with a curve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
