#!/usr/bin/python3
"""The layouts of hogwild's shared weights side by side, for issue 36's probe: on
each built-in problem, two workers with the weights plain (every update to the
shared weights), with hot coordinates (--hot-k 4096 --hot-flush 512: the hottest
features in a private window, flushed) and with replicas (--merge-every auto: a
private copy merged when due), against one worker and against the ceiling (two
one-worker runs at once, each on a private copy). Throughput beside accuracy:
a layout may not buy speed with accuracy (issue 36, "statistical efficiency is
checked"). Repetitions interleaved, medians; the CPU named.

    /usr/bin/python3 bench/layouts.py --build build --out /tmp/layouts [--reps 3] [--quick]

Problems: the generated RCV1-like set (logistic), SpamAssassin (logistic, from
../shared/data) and generated Netflix-like ratings (MF rank 10). Fashion-MNIST
softmax is left out where its files are absent (they are not in ../shared/data).
A layout a model refuses (hot coordinates need a feature-indexed model) is marked so.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from suite import cpu_name  # noqa: E402

LAYOUTS = {"plain": [], "hot": ["--hot-k", "4096", "--hot-flush", "512"],
           "replicas": ["--merge-every", "auto"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shared-data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                          "shared", "data"))
    ap.add_argument("--quick", action="store_true", help="small sets, one repetition")
    a = ap.parse_args()
    if a.quick:
        a.reps = 1
    os.makedirs(a.out, exist_ok=True)
    train_tool = os.path.join(a.build, "src", "hogwild_train")
    data_tool = os.path.join(a.build, "src", "hogwild_data")

    def prep(args, out):
        if not os.path.exists(out + ".test.cache"):
            subprocess.run([data_tool, *args, "--out", out + ".train.cache", "--test-out",
                            out + ".test.cache"], check=True, stdout=subprocess.DEVNULL)
        return out + ".train.cache", out + ".test.cache"

    problems = {}
    rows = 20000 if a.quick else 200000
    tr, te = prep(["generate", "--rows", str(rows), "--features", "47236", "--nnz-per-row", "75",
                   "--zipf", "1", "--noise", "0.03", "--seed", "3"], os.path.join(a.out, f"rcv1like-{rows}"))
    problems["RCV1-like"] = (tr, te, ["--model", "logistic", "--lr", "0.5", "--lr-decay", "0.7",
                                      "--epochs", "1" if a.quick else "3"])
    spam = os.path.join(a.shared_data, "spamassassin")
    if os.path.exists(os.path.join(spam, "spam.train.svm.gz")):
        out = os.path.join(a.out, "spam")
        for part in ("train", "test"):
            if not os.path.exists(f"{out}.{part}.cache"):
                subprocess.run([data_tool, "convert", os.path.join(spam, f"spam.{part}.svm.gz"), "--out",
                                f"{out}.{part}.cache"], check=True, stdout=subprocess.DEVNULL)
        problems["SpamAssassin"] = (out + ".train.cache", out + ".test.cache",
                                    ["--model", "logistic", "--lr", "0.5", "--lr-decay", "0.97",
                                     "--epochs", "5" if a.quick else "60"])
    users = 4000 if a.quick else 50000
    tr, te = prep(["generate", "--kind", "ratings", "--users", str(users), "--items", str(users // 4),
                   "--rank", "10", "--ratings", str(users * 20)], os.path.join(a.out, f"ratings-{users}"))
    problems["ratings"] = (tr, te, ["--model", "mf", "--rank", "10", "--lr", "0.05", "--lr-decay", "0.9",
                                    "--l2", "0.02", "--epochs", "2" if a.quick else "10"])

    tmp = tempfile.mkdtemp(prefix="layouts-")

    def start(problem, extra, tag):
        tr, te, opts = problems[problem]
        s = os.path.join(tmp, f"{tag}.json")
        p = subprocess.Popen([train_tool, "--train", tr, "--test", te, *opts, "-q", *extra, "--summary", s],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p, s

    def finish(started):
        out = []
        for p, s in started:
            text = p.communicate()[0]
            if p.returncode != 0:
                out.append({"refused": text.strip().splitlines()[-1] if text.strip() else "failed"})
                continue
            with open(s) as f:
                out.append(json.load(f))
        return out

    runs = []
    for rep in range(a.reps):  # interleaved: every configuration once a repetition
        for problem in problems:
            seed = ["--seed", str(rep + 1)]
            one = finish([start(problem, ["--workers", "1", *seed], "one")])[0]
            runs.append((problem, "one worker", one))
            for name, flags in LAYOUTS.items():
                r = finish([start(problem, ["--workers", "2", *flags, *seed], name)])[0]
                runs.append((problem, name, r))
            pair = finish([start(problem, ["--workers", "1", *seed], f"c{k}") for k in range(2)])
            runs.append((problem, "ceiling", {"samples_per_second": sum(r["samples_per_second"] for r in pair),
                                              "test_loss": pair[0]["test_loss"],
                                              "test_accuracy": pair[0].get("test_accuracy"),
                                              "test_rmse": pair[0].get("test_rmse")}))
        print(f"repetition {rep + 1} of {a.reps} done", flush=True)

    def med(problem, config, key):
        v = [r.get(key) for p, c, r in runs if p == problem and c == config and r.get(key) is not None]
        return statistics.median(v) if v else None

    print(f"\nlayouts, 2 workers, {cpu_name()}, {os.cpu_count()} cores, {a.reps} interleaved "
          f"repetition(s), medians\n")
    print("| problem | configuration | examples/s | x one worker | of the ceiling | test loss | "
          "accuracy (RMSE for MF) |")
    print("|---|---|---|---|---|---|---|")
    for problem in problems:
        one = med(problem, "one worker", "samples_per_second")
        ceiling = med(problem, "ceiling", "samples_per_second")
        for config in ["one worker", *LAYOUTS, "ceiling"]:
            refused = [r["refused"] for p, c, r in runs if p == problem and c == config and "refused" in r]
            if refused:
                print(f"| {problem} | {config} | refused: {refused[0][:80]} | | | | |")
                continue
            e = med(problem, config, "samples_per_second")
            loss = med(problem, config, "test_loss")
            quality = med(problem, config, "test_rmse") or med(problem, config, "test_accuracy")
            print(f"| {problem} | {config} | {e / 1e6:.2f}M | {e / one:.2f}x | {e / ceiling:.2f} | "
                  f"{loss:.4f} | {quality:.4f} |")
    with open(os.path.join(a.out, "layouts.json"), "w") as f:
        json.dump({"cpu": cpu_name(), "runs": [{"problem": p, "config": c, **r} for p, c, r in runs]}, f,
                  indent=1)


if __name__ == "__main__":
    main()
