"""bench/run.sh's `paper` section (bench/suite.py calls run(suite)): the Hogwild!
paper's comparison (Niu et al. 2011, Fig. 2 and Figs. 3-4) reproduced with
hogwild_sweep and hogwild_plot on this machine's cores:

- sparse SVM (hinge loss) on the RCV1-like generated set, and
- matrix factorisation on the Netflix-like generated ratings,

hogwild against lock against serial, workers 1, 2, ... up to the core count (and
once more, oversubscribed), 3 seeds (quick: 1), with the table of medians, the
Fig. 2-style table and the speed-up figure copied to docs/perf/ as
paper-<set>-*.png.
"""
import os
import shutil
import subprocess


def sweep(s, name, train, test, model, lrs, epochs, extra):
    a = s.a
    # A folder per setting: hogwild_sweep refuses to resume a folder whose runs had
    # other --epochs, so --quick and a full run keep apart.
    out = os.path.join(s.out, "paper", name + ("-quick" if a.quick else ""))
    cmd = [os.path.join(s.build, "src", "hogwild_sweep"), "--train", train, "--test", test,
           "--model", model, "--workers", ",".join(str(w) for w in s.paper_workers),
           "--mode", "serial,hogwild,lock", "--lr", lrs, "--seeds", "1" if a.quick else "3",
           "--epochs", str(epochs), "--telemetry", "--out", out,
           "--hogwild-train", s.train_bin] + [x for k, v in extra.items()
                                               for x in ("--train-option", f"{k}={v}")]
    print(f"\n== paper: {name} ({' '.join(cmd[1:])})", flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-6000:], flush=True)
    if r.returncode != 0:
        s.note(f"the paper sweep {name} failed (exit {r.returncode}): see {out}")
        return
    p = subprocess.run([os.path.join(s.build, "src", "hogwild_plot"), out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        s.note(f"hogwild_plot failed on {out}: {p.stdout[-500:]}")
        return
    with open(os.path.join(out, "table.md")) as f:
        s.tables.append((f"The Hogwild! paper's comparison: {name}", f.read()))
    with open(os.path.join(out, "plots", "table.md")) as f:
        s.tables.append((f"Fig. 2-style table: {name}", f.read()))
    perf = os.path.join(os.path.dirname(s.build), "docs", "perf")
    os.makedirs(perf, exist_ok=True)
    for fig in (f"speedup-{model}", f"suboptimality-{model}", f"efficiency-{model}"):
        src = os.path.join(out, "plots", fig + ".png")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(perf, f"paper-{name}-{fig}.png"))


def run(s):
    a = s.a
    cores = os.cpu_count() or 1
    s.paper_workers = sorted({1, 2, max(1, cores // 2), cores, 2 * cores} - {0})
    if "rcv1like" in s.datasets:
        d = s.datasets["rcv1like"]
        sweep(s, "rcv1like-svm", d["train"], d["test"], "hinge", "0.1,0.5", 3 if a.quick else 8,
              {"lr-decay": 0.8})
    if s.ratings_data():
        d = s.datasets["ratings"]
        sweep(s, "netflixlike-mf", d["train"], d["test"], "mf", "0.05,0.1", 3 if a.quick else 8,
              {"rank": 10, "l2": 0.02, "lr-decay": 0.9})
