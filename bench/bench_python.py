#!/usr/bin/python3
"""`import hogwild` against the command line, in one process, repetitions interleaved
(docs/PYTHON.md, "Speed"; ../shared/BENCHMARKING.md):

  train     examples/s of hogwild.train on scipy CSR rows against hogwild_train on the
            same rows (a binary cache: no parsing in either), same model and options;
            each side's own measure (the summary's samples_per_second)
  predict   hogwild.Model.predict_proba on CSR rows (its row checks, the model's view of
            the rows, the prediction) against hogwild_predict --probabilities on the
            same rows in a cache (its load_seconds: mapping, checking and preparing
            them, plus its predict_seconds; the process start and the output left out)
  fixed     a run's fixed cost, serial and 1, 2, 4 hogwild workers on a small model
            (SpamAssassin's 2^20 weights): the module's, the wall time of the call
            less the training the run reports (train_seconds), its rows checked once
            (hogwild.dataset); and the run's own, run_seconds - train_seconds from
            each side's summary (arena, workers' start and end, result, teardown);
            beside them the CLI's whole process less its training, which adds the
            program's start (dynamic linking) and the loading of its cache
  call      the per-call overhead in Python: hogwild.train((X, y)) against
            hogwild.train(dataset) of the same rows (the arrays' checks), and a tiny
            run's wall time less its training

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py --build build [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import load_svmlight_file

import hogwild
from suite import cpu_name  # bench/suite.py: the model and its vector units


def median(xs):
    return statistics.median(xs)


def cli_train(tool, cache, opts, summary):
    args = [tool, "--train", cache, "-q", "--summary", summary]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    t = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    wall = time.perf_counter() - t
    with open(summary) as f:
        return wall, json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                   "spamassassin", "spam.train.svm.gz"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="two repetitions, for a smoke run")
    a = ap.parse_args()
    if not os.path.exists(a.data):  # no ../shared beside this checkout: skipped, as the
        print(f"skipped: {a.data} is missing (../shared/data)")  # *_shared_data tests
        sys.exit(77)
    reps = 2 if a.quick else a.reps
    train_tool = os.path.join(a.build, "src", "hogwild_train")
    predict_tool = os.path.join(a.build, "src", "hogwild_predict")
    data_tool = os.path.join(a.build, "src", "hogwild_data")
    print(f"# bench_python on {cpu_name()}, {os.cpu_count()} cores; {reps} interleaved repetitions; medians")

    X, y = load_svmlight_file(a.data, zero_based=False, dtype=np.float32)
    y = y.astype(np.float32)
    tmp = tempfile.mkdtemp(prefix="bench_python")
    cache = os.path.join(tmp, "train.cache")
    subprocess.run([data_tool, "convert", a.data, "--out", cache], check=True,
                   capture_output=True)
    summary = os.path.join(tmp, "summary.json")
    rows = X.shape[0]

    # --- train: examples/s, module against CLI ------------------------------------
    print("\n## train: examples/s (each side's samples_per_second), SpamAssassin logistic, CSR rows")
    print(f"{'configuration':<28} {'CLI':>10} {'module':>10} {'ratio':>7}")
    epochs = 5 if a.quick else 20
    configs = [dict(mode="serial"), dict(mode="hogwild", workers=1), dict(mode="hogwild", workers=2)]
    ratios = []
    for c in configs:
        opts = dict(model="logistic", epochs=epochs, lr=0.5, **c)
        cli, mod = [], []
        for _ in range(reps if a.quick else 2 * reps):  # the spread of a ratio is wide here
            cli.append(cli_train(train_tool, cache, opts, summary)[1]["samples_per_second"])
            mod.append(hogwild.train((X, y), **opts).summary["samples_per_second"])
        r = median(mod) / median(cli)
        ratios.append(r)
        name = ", ".join(f"{k} {v}" for k, v in c.items())
        print(f"{name:<28} {median(cli) / 1e6:>9.2f}M {median(mod) / 1e6:>9.2f}M {r:>6.2f}x")

    # --- predict: module against hogwild_predict ------------------------------------
    print("\n## predict: rows/s of predict_proba on CSR against hogwild_predict --probabilities")
    model = os.path.join(tmp, "spam.safetensors")
    hogwild.train((X, y), model="logistic", epochs=2, lr=0.5, save_model=model)
    m = hogwild.load_model(model)
    copies = 4 if a.quick else 20  # 19k or 96k rows
    big = __import__("scipy.sparse", fromlist=["vstack"]).vstack([X] * copies).tocsr()
    big_cache = os.path.join(tmp, "big.cache")
    big_svm = os.path.join(tmp, "big.svm")
    from sklearn.datasets import dump_svmlight_file
    dump_svmlight_file(big, np.tile(y, copies), big_svm, zero_based=False)
    subprocess.run([data_tool, "convert", big_svm, "--out", big_cache], check=True,
                   capture_output=True)
    cli_t, mod_t = [], []
    for _ in range(reps):
        pred_summary = os.path.join(tmp, "pred.json")
        t = time.perf_counter()
        subprocess.run([predict_tool, "--model", model, "--data", big_cache, "--probabilities",
                        "--output", os.devnull, "--summary", pred_summary, "-q"], check=True)
        wall = time.perf_counter() - t
        with open(pred_summary) as f:
            s = json.load(f)
        cli_t.append(s["load_seconds"] + s["predict_seconds"])
        t = time.perf_counter()
        m.predict_proba(big)
        mod_t.append(time.perf_counter() - t)
    n = big.shape[0]
    pr = median(cli_t) / median(mod_t)
    print(f"{'hogwild_predict':<28} {n / median(cli_t) / 1e6:>9.2f}M rows/s")
    print(f"{'module predict_proba':<28} {n / median(mod_t) / 1e6:>9.2f}M rows/s   ratio {pr:.2f}x")

    # --- fixed cost of a run ------------------------------------------------------
    d = hogwild.dataset((X, y))
    print("\n## fixed cost of a run (ms), 1 epoch: the call's wall less train_seconds (module), "
          "run_seconds less train_seconds (both), the CLI's process less train_seconds")
    print(f"{'configuration':<28} {'module call':>12} {'module run':>11} {'CLI run':>8} {'CLI process':>12}")
    start = []
    for _ in range(reps * 2):  # the CLI's own start: exec and dynamic linking
        t = time.perf_counter()
        subprocess.run([train_tool, "--version"], check=True, capture_output=True)
        start.append(time.perf_counter() - t)
    fixed, cli_fixed = {}, {}
    for c in [dict(mode="serial"), dict(mode="hogwild", workers=1), dict(mode="hogwild", workers=2),
              dict(mode="hogwild", workers=4)]:
        opts = dict(model="logistic", epochs=1, lr=0.5, **c)
        mod, mod_run, cli, cli_run = [], [], [], []
        for _ in range(reps * 2):
            t = time.perf_counter()
            r = hogwild.train(d, **opts)
            mod.append(time.perf_counter() - t - r.summary["train_seconds"])
            mod_run.append(r.summary["run_seconds"] - r.summary["train_seconds"])
            wall, s = cli_train(train_tool, cache, opts, summary)
            cli.append(wall - s["train_seconds"])
            cli_run.append(s["run_seconds"] - s["train_seconds"])
        name = ", ".join(f"{k} {v}" for k, v in c.items())
        fixed[name] = median(mod)
        cli_fixed[name] = median(cli_run)
        print(f"{name:<28} {median(mod) * 1e3:>12.1f} {median(mod_run) * 1e3:>11.1f} "
              f"{median(cli_run) * 1e3:>8.1f} {median(cli) * 1e3:>12.1f}")
    print(f"(the CLI's start alone, `hogwild_train --version`: {median(start) * 1e3:.1f} ms)")

    # --- per-call overhead in Python ------------------------------------------------
    arrays, checked = [], []
    for _ in range(reps * 2):
        t = time.perf_counter()
        r = hogwild.train((X, y), mode="serial", epochs=1)
        arrays.append(time.perf_counter() - t - r.summary["train_seconds"])
        t = time.perf_counter()
        r = hogwild.train(d, mode="serial", epochs=1)
        checked.append(time.perf_counter() - t - r.summary["train_seconds"])
    call = median(arrays) - median(checked)
    print(f"\n## per call: hogwild.train((X, y)) on SpamAssassin's CSR rows costs {call * 1e3:.1f} ms "
          f"more than on hogwild.dataset((X, y)) (checking {X.nnz} entries)")
    rng = np.random.default_rng(1)
    Xs = rng.random((1000, 100), dtype=np.float32)
    ys = (Xs[:, 0] > 0.5).astype(np.float32)
    over = []
    for _ in range(reps * 3):
        t = time.perf_counter()
        r = hogwild.train((Xs, ys), mode="serial", epochs=1)
        over.append(time.perf_counter() - t - r.summary["train_seconds"])
    print(f"## per call: hogwild.train on 1000 x 100 dense rows, serial, 1 epoch: "
          f"{median(over) * 1e3:.1f} ms beyond its training")

    print(f"\nsummary: train ratio min {min(ratios):.2f}x; predict ratio {pr:.2f}x; per-call "
          f"{median(over) * 1e3:.1f} ms (tiny), +{call * 1e3:.1f} ms (SpamAssassin's arrays); fixed cost (module) " +
          ", ".join(f"{k}: {v * 1e3:.1f} ms" for k, v in fixed.items()) + "; (CLI run) " +
          ", ".join(f"{k}: {v * 1e3:.1f} ms" for k, v in cli_fixed.items()))


if __name__ == "__main__":
    sys.exit(main())
