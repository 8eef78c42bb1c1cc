#!/usr/bin/python3
"""The performance suite behind bench/run.sh (docs/PERFORMANCE.md).

Runs the built binaries (hogwild_train, hogwild_data, bench/bench_loop,
bench/bench_dense_layer, bench/bench_prepare, bench/bench_allreduce) and the
PyTorch peers in bench/compare/, and writes to --out (the `ddp` section is
bench/suite_ddp.py):
  tables.md      the markdown tables it also prints
  results.json   every run with its raw figures (and per-epoch test loss)
  results.csv    the same runs, one row each, without the curves
  *.png          speedup against workers; test loss against wall time

Rules it keeps (docs/PERFORMANCE.md): every configuration is repeated
--reps times, repetitions are interleaved (A B C A B C), every figure is a
median, and every ratio is taken between runs of the same repetition (the
median of those per-repetition ratios), never across separate invocations.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import suite_ddp
import suite_gpu
import suite_paper
import suite_science

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def amx_bf16():
    """Whether this CPU has the AMX-BF16 tile unit (--matmul-precision bf16)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " amx_bf16" in line for line in f)
    except OSError:
        return False


def cpu_name():
    """The CPU's model and the vector units the kernels choose between: every
    figure says which machine it was measured on (Intel with AMX and AMD without
    take different kernels)."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    units = [u for u, f in (("AVX-512", "avx512f"), ("AVX-512 BF16", "avx512_bf16"),
                            ("AMX-BF16", "amx_bf16")) if f in flags]
    return f"{model} ({', '.join(units) or 'no AVX-512'})"


def fmt_rate(r):
    if r is None:
        return "n/a"
    return f"{r / 1e6:.3g}M" if r >= 1e6 else f"{r / 1e3:.3g}k"


def fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)


class Suite:
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.out = os.path.abspath(a.out)
        self.data = os.path.join(self.out, "data")
        self.tmp = tempfile.mkdtemp(prefix="hogwild-bench-")
        os.makedirs(self.data, exist_ok=True)
        self.train_bin = os.path.join(self.build, "src", "hogwild_train")
        self.data_bin = os.path.join(self.build, "src", "hogwild_data")
        self.runs = []  # every run, as a dict
        self.tables = []  # (title, markdown)
        self.notes = []
        help_text = subprocess.run([self.train_bin, "--help"], capture_output=True,
                                   text=True).stdout
        self.models = set(re.findall(r"[a-z]+", help_text.split("--model", 1)[1].split("\n")[0]))
        self.flags = set(re.findall(r"--[a-z][a-z-]+", help_text))
        self.workers = list(range(1, (a.max_workers or os.cpu_count() or 1) + 1))
        self.counter = 0

    # ---- running things ----------------------------------------------------------
    def note(self, text):
        print("note:", text, flush=True)
        self.notes.append(text)

    def tmpfile(self, stem):
        self.counter += 1
        return os.path.join(self.tmp, f"{stem}-{self.counter}")

    def train_cmd(self, opts, summary, metrics):
        cmd = [self.train_bin, "-q", "--summary", summary, "--metrics", metrics]
        # "hogwild" in these tables is plain Hogwild!, every update to the shared
        # weights: where the binary has --layout, its default (auto: a probe picks
        # plain or replicas) is bench/layouts.py's to measure, not these tables'.
        if (opts.get("mode") == "hogwild" and "--layout" in self.flags
                and not {"layout", "merge-every", "hot-k"} & set(opts)):
            opts = dict(opts, layout="plain")
        for k, v in opts.items():
            if v is True:
                cmd.append("--" + k)
            elif v is not None and v is not False:
                cmd += ["--" + k, str(v)]
        if self.a.pin and opts.get("mode") != "serial" and "--pin" in self.flags:
            cmd.append("--pin")
        return cmd

    @staticmethod
    def read_run(summary, metrics):
        with open(summary) as f:
            r = json.load(f)
        with open(metrics) as f:
            r["curve"] = [json.loads(line) for line in f if line.strip()]
        return r

    def train(self, opts):
        s, m = self.tmpfile("summary"), self.tmpfile("metrics")
        subprocess.run(self.train_cmd(opts, s, m), check=True, stdout=subprocess.DEVNULL)
        return self.read_run(s, m)

    def ceiling(self, n, opts):
        """n single-worker hogwild runs on private copies of the model, started
        together: what n cores give with no sharing at all."""
        files = [(self.tmpfile("summary"), self.tmpfile("metrics")) for _ in range(n)]
        o = dict(opts, mode="hogwild", workers=1)
        procs = [subprocess.Popen(self.train_cmd(o, s, m), stdout=subprocess.DEVNULL)
                 for s, m in files]
        for p in procs:
            if p.wait() != 0:
                raise SystemExit(f"ceiling run failed: {p.args}")
        rs = [self.read_run(s, m) for s, m in files]
        r = dict(rs[0])
        for k in ("samples_per_second", "nnz_per_second"):
            r[k] = sum(x[k] for x in rs)
        r["peak_rss_bytes"] = sum(x["peak_rss_bytes"] for x in rs)
        r["curve"] = []
        return r

    def record(self, section, dataset, config, workers, rep, r):
        row = {"section": section, "dataset": dataset, "config": config, "workers": workers,
               "rep": rep}
        row.update({k: r.get(k) for k in (
            "samples_per_second", "nnz_per_second", "train_seconds", "test_loss",
            "test_accuracy", "test_rmse", "peak_rss_bytes", "pss_tree_bytes")})
        row["curve"] = [(p["time"], p.get("test_loss")) for p in r.get("curve", [])
                        if p.get("end_of_epoch")]
        self.runs.append(row)
        print(f"  {section:10} {dataset:10} {config:14} x{workers:<2} rep {rep}: "
              f"{fmt_rate(row['samples_per_second'])} examples/s"
              + (f", test loss {row['test_loss']:.4f}" if row["test_loss"] else ""),
              flush=True)
        return row

    def select(self, **kw):
        return [r for r in self.runs if all(r[k] == v for k, v in kw.items())]

    def med(self, key, **kw):
        return median([r[key] for r in self.select(**kw)])

    def ratio(self, key, num, den):
        """Median over repetitions of num/den, both from the same repetition."""
        rs = []
        for a in self.select(**num):
            b = [r for r in self.select(**den) if r["rep"] == a["rep"]]
            if b and b[0][key] and a[key] is not None:
                rs.append(a[key] / b[0][key])
        return median(rs)

    def table(self, title, header, rows):
        md = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
        md += "".join("| " + " | ".join(str(c) for c in row) + " |\n" for row in rows)
        self.tables.append((title, md))
        print(f"\n### {title}\n\n{md}", flush=True)

    # ---- data ---------------------------------------------------------------------
    def prepare(self, sparse=True):
        """The sparse data sets of the yardstick and scaling sections (generated once
        into <out>/data/); sparse=False when no section that reads them runs."""
        a = self.a
        src = os.path.join(a.shared_data, "spamassassin")
        self.have_spam = os.path.exists(f"{src}/spam.train.svm.gz")
        if not self.have_spam:
            self.note(f"no SpamAssassin at {src} (--shared-data): its rows are skipped")
        self.datasets = {}
        if not sparse:
            return
        self.rcv1 = os.path.join(self.data, f"rcv1like-{a.rows}")
        if not os.path.exists(self.rcv1 + ".test.cache"):
            subprocess.run([os.path.join(self.build, "bench", "bench_prepare"), "--rows",
                            str(a.rows), "--out", self.rcv1], check=True)
        self.datasets["rcv1like"] = {
            "train": self.rcv1 + ".train.cache", "test": self.rcv1 + ".test.cache",
            "lr": a.rcv_lr, "lr-decay": a.rcv_decay, "merge-every": 4096}
        if not self.have_spam:
            return
        self.spam = os.path.join(self.data, "spam")
        for part in ("train", "test"):
            if not os.path.exists(f"{self.spam}.{part}.cache"):
                subprocess.run([self.data_bin, "convert", f"{src}/spam.{part}.svm.gz", "--out",
                                f"{self.spam}.{part}.cache"], check=True,
                               stdout=subprocess.DEVNULL)
        # 4810 rows: many short epochs, so that each run lasts about a second
        # (a merge visits every trained coordinate: 61k features spread over 2^20
        # hashed slots, so about once per worker's epoch at 2 workers)
        self.datasets["spam"] = {"train": self.spam + ".train.cache",
                                 "test": self.spam + ".test.cache", "lr": 0.5, "lr-decay": 0.97,
                                 "merge-every": 2048}

    # ---- 2. the hand-written loop as the yardstick ---------------------------------------
    def yardstick(self):
        print("\n== yardstick: hand-written loop vs hogwild_train (serial, hogwild x1)")
        epochs = {"spam": self.a.spam_epochs, "rcv1like": self.a.epochs}
        loop = os.path.join(self.build, "bench", "bench_loop")
        for rep in range(self.a.reps):
            for name, d in self.datasets.items():
                e = epochs[name]
                def hand_loop(config, *flags):
                    out = subprocess.run([loop, "--train", d["train"], *flags, "--epochs", str(e),
                                          "--lr", str(d["lr"]), "--lr-decay", str(d["lr-decay"]),
                                          "--seed", str(rep + 1)],
                                         check=True, capture_output=True, text=True).stdout
                    r = json.loads(out)
                    r["samples_per_second"] = r.pop("examples_per_second")
                    self.record("yardstick", name, config, 1, rep, r)
                hand_loop("hand loop", "--test", d["test"])
                hand_loop("hand loop, prefetch", "--prefetch")
                hand_loop("hand loop, atomic_ref", "--relaxed")
                # Without --test, like the hand loop's timed part: with a test set
                # hogwild_train also copies the model to a snapshot every epoch.
                for mode in ("serial", "hogwild"):
                    r = self.train({"train": d["train"], "mode": mode,
                                    "workers": 1, "epochs": e, "lr": d["lr"],
                                    "lr-decay": d["lr-decay"], "seed": rep + 1})
                    self.record("yardstick", name, mode, 1, rep, r)

    def yardstick_table(self):
        if not self.select(section="yardstick"):
            return
        rows = []
        for name in [d for d in ("rcv1like", "spam") if d in self.datasets]:
            for cfg in ("hand loop", "hand loop, prefetch", "hand loop, atomic_ref", "serial",
                        "hogwild"):
                k = dict(section="yardstick", dataset=name, config=cfg)
                den = dict(section="yardstick", dataset=name, config="hand loop")
                pf = dict(section="yardstick", dataset=name, config="hand loop, prefetch")
                acc = self.med("test_accuracy", **k) if cfg.startswith("hand") else self.med(
                    "test_accuracy", section="scaling", dataset=name, config=cfg, workers=1)
                rows.append([name, cfg, fmt_rate(self.med("samples_per_second", **k)),
                             fmt_rate(self.med("nnz_per_second", **k)),
                             fmt(self.ratio("samples_per_second", k, den), ".2f") + "x",
                             fmt(self.ratio("nnz_per_second", k, den), ".2f") + "x",
                             fmt(self.ratio("samples_per_second", k, pf), ".2f") + "x",
                             fmt(acc, ".4f")])
        self.table("Yardstick: hand-written serial loop vs hogwild_train (1 worker)",
                   ["data", "run", "examples/s", "non-zeros/s", "examples/s vs hand loop",
                    "non-zeros/s vs hand loop", "examples/s vs hand loop + prefetch",
                    "test accuracy"],
                   rows)

    # ---- 3 and 4. scaling and time to target --------------------------------------
    def configs(self):
        if hasattr(self, "_configs"):
            return self._configs
        c = [("hogwild", {"mode": "hogwild"})]
        if "--hot-k" in self.flags:
            c.append(("hogwild+hot", {"mode": "hogwild", "hot-k": self.a.hot_k,
                                      "hot-flush": self.a.hot_flush}))
        else:
            self.note("hogwild_train has no --hot-k: the hot-coordinate rows are skipped")
        if "--merge-every" in self.flags:  # F per dataset (scaling() fills it in)
            c.append(("hogwild+replica", {"mode": "hogwild", "merge-every": None}))
        else:
            self.note("hogwild_train has no --merge-every: the replica rows are skipped")
        c += [("atomic", {"mode": "atomic"}), ("lock", {"mode": "lock"})]
        self._configs = c
        return c

    def scaling(self, name, epochs, with_ceiling=True):
        print(f"\n== scaling and convergence on {name}")
        d = self.datasets[name]
        base = {"train": d["train"], "test": d["test"], "epochs": epochs, "lr": d["lr"],
                "lr-decay": d["lr-decay"]}
        base.update(d.get("extra", {}))
        merge_every = d.get("merge-every")
        for rep in range(self.a.reps):
            base["seed"] = rep + 1
            self.record("scaling", name, "serial", 1, rep, self.train(dict(base, mode="serial")))
            for n in self.workers:
                if with_ceiling:
                    self.record("scaling", name, "ceiling", n, rep, self.ceiling(n, base))
                for cfg, o in self.configs():
                    if "hot-k" in o and name == "ratings":
                        continue  # a linear-model option
                    if "merge-every" in o:
                        if not merge_every:
                            continue  # (MF: its rows share little; replicas would copy 44 MB)
                        o = dict(o, **{"merge-every": merge_every})
                    self.record("scaling", name, cfg, n, rep,
                                self.train(dict(base, workers=n, **o)))
        self.scaling_table(name, with_ceiling)

    def time_to(self, run, target):
        for t, loss in run["curve"]:
            if loss is not None and loss <= target:
                return t
        return None

    def scaling_table(self, name, with_ceiling):
        s = dict(section="scaling", dataset=name)
        serial_loss = self.med("test_loss", config="serial", **s)
        target = serial_loss * 1.01 if serial_loss else None
        rows = []
        for cfg in ["serial"] + [c for c, _ in self.configs()] + (["ceiling"] if with_ceiling else []):
            for n in ([1] if cfg == "serial" else self.workers):
                k = dict(s, config=cfg, workers=n)
                if not self.select(**k):
                    continue
                tt = median([self.time_to(r, target) for r in self.select(**k)]) \
                    if target and cfg != "ceiling" else None
                rows.append([
                    cfg, n, fmt_rate(self.med("samples_per_second", **k)),
                    fmt(self.ratio("samples_per_second", k, dict(s, config=cfg, workers=1)), ".2f") + "x",
                    fmt(self.ratio("samples_per_second", k, dict(s, config="ceiling", workers=n)), ".2f") + "x"
                    if with_ceiling else "n/a",
                    fmt(self.ratio("samples_per_second", k, dict(s, config="serial", workers=1)), ".2f") + "x",
                    fmt(self.med("test_loss", **k), ".4f"),
                    fmt(self.med("test_accuracy", **k), ".4f") if name != "ratings" else
                    fmt(self.med("test_rmse", **k), ".4f"),
                    fmt(tt, ".2f") + (" s" if tt is not None else " (not reached)")])
        self.table(f"Scaling and time to target on {name} (target test loss {fmt(target, '.4f')}"
                   f" = 1.01 x serial's final)",
                   ["run", "workers", "examples/s", "vs 1 worker", "vs ceiling", "vs serial",
                    "final test loss", "accuracy" if name != "ratings" else "rmse",
                    "time to target"], rows)

    def ratings(self):
        if "mf" not in self.models:
            self.note("hogwild_train has no --model mf: the matrix-factorisation rows are skipped")
            return
        if self.ratings_data():
            self.scaling("ratings", self.a.epochs)

    def ratings_data(self):
        """Generates the ratings set once; True when self.datasets has it."""
        if "ratings" in self.datasets:
            return True
        # Netflix-like in shape (many users, fewer items, popularity skew), scaled down.
        prefix = os.path.join(self.data, f"ratings-{self.a.ratings}")
        if not os.path.exists(prefix + ".test.cache"):
            r = subprocess.run([self.data_bin, "generate", "--kind", "ratings", "--users",
                                "100000", "--items", "10000", "--rank", "10", "--ratings",
                                str(self.a.ratings), "--out", prefix + ".train.cache",
                                "--test-out", prefix + ".test.cache"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                self.note("`hogwild_data generate --kind ratings` failed, MF rows skipped: "
                          + (r.stderr.strip().splitlines() or ["?"])[-1])
                return False
        self.datasets["ratings"] = {"train": prefix + ".train.cache",
                                    "test": prefix + ".test.cache", "lr": 0.02, "lr-decay": 0.9,
                                    "extra": {"model": "mf", "rank": 10, "l2": 0.02}}
        return True

    # ---- which rows each worker trains: one permutation of all rows, or slices ------
    def partition(self):
        """--partition shuffled (each epoch one permutation of all rows, split among
        the workers) against contiguous (worker k's slice of the file, shuffled inside
        it): what visiting rows spread over the whole set costs, hogwild mode."""
        print("\n== partition: shuffled (whole-set permutation) against contiguous slices")
        if "--partition" not in self.flags:
            self.note("hogwild_train has no --partition: the partition rows are skipped")
            return
        fm = self.a.fashion_mnist
        cases = []
        for name in ("rcv1like", "spam"):
            if name in self.datasets:
                d = self.datasets[name]
                cases.append((name, {"train": d["train"], "test": d["test"], "lr": d["lr"],
                                     "lr-decay": d["lr-decay"],
                                     "epochs": self.a.epochs if name == "rcv1like"
                                     else self.a.spam_epochs}))
        if os.path.exists(f"{fm}/train-images-idx3-ubyte.gz"):
            cases.append(("fmnist softmax", {"train": f"{fm}/train-images-idx3-ubyte.gz",
                                             "test": f"{fm}/t10k-images-idx3-ubyte.gz",
                                             "model": "softmax", "batch": 32, "lr": 0.1,
                                             "epochs": 3}))
        if "mf" in self.models and self.ratings_data():
            d = self.datasets["ratings"]
            cases.append(("ratings", dict({"train": d["train"], "test": d["test"], "lr": d["lr"],
                                           "lr-decay": d["lr-decay"], "epochs": self.a.epochs},
                                          **d["extra"])))
        for rep in range(self.a.reps):
            for name, base in cases:
                for n in self.workers:
                    for part in ("shuffled", "contiguous"):
                        r = self.train(dict(base, mode="hogwild", workers=n, partition=part,
                                            seed=rep + 1))
                        self.record("partition", name, part, n, rep, r)
        rows = []
        for name, _ in cases:
            for n in self.workers:
                k = dict(section="partition", dataset=name, workers=n)
                sh, co = dict(k, config="shuffled"), dict(k, config="contiguous")
                metric = "test_rmse" if name == "ratings" else "test_accuracy"
                rows.append([name, n, fmt_rate(self.med("samples_per_second", **sh)),
                             fmt_rate(self.med("samples_per_second", **co)),
                             fmt(self.ratio("samples_per_second", sh, co), ".2f") + "x",
                             fmt(self.med(metric, **sh), ".4f"),
                             fmt(self.med(metric, **co), ".4f")])
        self.table("Partition: shuffled (one permutation of all rows per epoch) against "
                   "contiguous slices, hogwild", ["data", "workers", "shuffled examples/s",
                                                   "contiguous examples/s",
                                                   "shuffled vs contiguous",
                                                   "shuffled accuracy (MF: rmse)",
                                                   "contiguous accuracy (MF: rmse)"], rows)

    # ---- 5 and 6. PyTorch side by side, memory -------------------------------------
    def peers(self):
        print("\n== side by side with PyTorch (torch.multiprocessing Hogwild pattern)")
        try:
            subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True,
                           capture_output=True)
        except subprocess.CalledProcessError:
            self.note("python3-torch is not installed: the PyTorch comparison is skipped "
                      "(scripts/install-bench-deps.sh)")
            return
        fm = self.a.fashion_mnist
        spam = os.path.join(self.a.shared_data, "spamassassin")
        cases = [("softmax", f"{fm}/train-images-idx3-ubyte.gz", f"{fm}/t10k-images-idx3-ubyte.gz",
                  32, 3, 0.1, {}),
                 ("logistic", f"{spam}/spam.train.svm.gz", f"{spam}/spam.test.svm.gz", 1, 5, 0.5, {})]
        if not self.have_spam:
            cases.pop()
        if "mlp" in self.models:
            cases.insert(1, ("mlp", f"{fm}/train-images-idx3-ubyte.gz",
                             f"{fm}/t10k-images-idx3-ubyte.gz", 32, 3, 0.1, {"hidden": "256,128"}))
        else:
            self.note("hogwild_train has no --model mlp: the MLP comparison is skipped")
        # bf16 products beside fp32 where this CPU has the AMX tile unit: ours with
        # --matmul-precision bf16, PyTorch with CPU autocast to bfloat16.
        bf16 = "--matmul-precision" in self.flags and "mlp" in self.models and amx_bf16()
        if "mlp" in self.models and not bf16:
            self.note("no AMX-BF16 here (or no --matmul-precision): the MLP's bf16 rows are skipped")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        for rep in range(self.a.peer_reps):
            for model, tr, te, batch, epochs, lr, extra in cases:
                for n in self.workers:
                    cmd = ["/usr/bin/python3", os.path.join(HERE, "compare", "torch_hogwild.py"),
                           "--model", model, "--train", tr, "--test", te, "--workers", str(n),
                           "--batch", str(batch), "--epochs", str(epochs), "--lr", str(lr),
                           "--seed", str(rep + 1)]
                    cmd += [x for k, v in extra.items() for x in ("--" + k, v)]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                         env=env).stdout
                    self.record("peers", model, "pytorch", n, rep, json.loads(out.splitlines()[-1]))
                    r = self.train(dict({"train": tr, "test": te, "model": model, "mode": "hogwild",
                                         "workers": n, "batch": batch, "epochs": epochs, "lr": lr,
                                         "seed": rep + 1}, **extra))
                    self.record("peers", model, "hogwild_train", n, rep, r)
                    if bf16 and model == "mlp":
                        out = subprocess.run(cmd + ["--bf16"], check=True, capture_output=True,
                                             text=True, env=env).stdout
                        self.record("peers", model, "pytorch+bf16", n, rep,
                                    json.loads(out.splitlines()[-1]))
                        r = self.train(dict({"train": tr, "test": te, "model": model,
                                             "mode": "hogwild", "workers": n, "batch": batch,
                                             "epochs": epochs, "lr": lr, "seed": rep + 1,
                                             "matmul-precision": "bf16"}, **extra))
                        self.record("peers", model, "hogwild_train+bf16", n, rep, r)
                        if n > 1 and "--merge-every" in self.flags:
                            r = self.train(dict({"train": tr, "test": te, "model": model,
                                                 "mode": "hogwild", "workers": n, "batch": batch,
                                                 "epochs": epochs, "lr": lr, "seed": rep + 1,
                                                 "matmul-precision": "bf16",
                                                 "merge-every": self.a.peer_merge_every}, **extra))
                            self.record("peers", model, "hogwild_train+bf16+replica", n, rep, r)
                    if n > 1 and model in ("softmax", "mlp") and "--merge-every" in self.flags:
                        # Replicated Hogwild beside it: every example (softmax) or
                        # every batch (MLP) writes every weight
                        r = self.train(dict({"train": tr, "test": te, "model": model,
                                             "mode": "hogwild", "workers": n, "batch": batch,
                                             "epochs": epochs, "lr": lr, "seed": rep + 1,
                                             "merge-every": self.a.peer_merge_every}, **extra))
                        self.record("peers", model, "hogwild_train+replica", n, rep, r)
        rows = []
        F = self.a.peer_merge_every
        pairs = [("hogwild_train", "pytorch", ""),
                 ("hogwild_train+replica", "pytorch", f", ours with --merge-every {F}"),
                 ("hogwild_train+bf16", "pytorch", ", ours bf16 against PyTorch fp32"),
                 ("hogwild_train+bf16+replica", "pytorch",
                  f", ours bf16 with --merge-every {F} against PyTorch fp32"),
                 ("hogwild_train+bf16", "pytorch+bf16", ", both bf16 (PyTorch autocast)")]
        for model, *_ in cases:
            for n, (ours, theirs, how) in [(n, p) for n in self.workers for p in pairs]:
                k = dict(section="peers", dataset=model, workers=n)
                t, h = dict(k, config=theirs), dict(k, config=ours)
                if not self.select(**h) or not self.select(**t):
                    continue
                label = model + how
                rows.append([label, n, fmt_rate(self.med("samples_per_second", **t)),
                             fmt_rate(self.med("samples_per_second", **h)),
                             fmt(self.ratio("samples_per_second", h, t), ".1f") + "x",
                             fmt(self.med("test_accuracy", **t), ".4f"),
                             fmt(self.med("test_accuracy", **h), ".4f"),
                             fmt((self.med("pss_tree_bytes", **t) or 0) / 2**20, ".0f") + " MiB",
                             fmt((self.med("peak_rss_bytes", **h) or 0) / 2**20, ".0f") + " MiB"])
        self.table("Side by side with PyTorch (same data, batch, epochs, lr, workers)",
                   ["model", "workers", "PyTorch examples/s", "hogwild examples/s", "ratio",
                    "PyTorch accuracy", "hogwild accuracy", "PyTorch memory (PSS tree)",
                    "hogwild memory (PSS tree)"], rows)

    def memory(self):
        rows = []
        sizes = {name: d["train"] for name, d in self.datasets.items() if name != "ratings"}
        for name, path in sizes.items():
            data = os.path.getsize(path) + os.path.getsize(path.replace(".train.", ".test."))
            for n in self.workers:
                k = dict(section="scaling", dataset=name, config="hogwild", workers=n)
                peak = self.med("peak_rss_bytes", **k)
                if peak is None:
                    continue
                budget = data + 2 * 4 * 50000 + n * 30 * 2**20  # model + 2 snapshot slots
                rows.append([name, n, f"{data / 2**20:.0f} MiB", f"{peak / 2**20:.0f} MiB",
                             f"{budget / 2**20:.0f} MiB", "yes" if peak <= budget else "NO"])
        self.table("Memory: peak of the whole process tree (shared pages counted once)",
                   ["data", "workers", "data (train+test)", "peak tree", "budget data+model+30 MiB/worker",
                    "within"], rows)

    # ---- the dense layer's kernels: float rows against byte rows, every ISA --------
    def kernels(self):
        print("\n== dense layer: float rows against byte rows (bench_dense_layer)")
        out = subprocess.run([os.path.join(self.build, "bench", "bench_dense_layer"), "--reps",
                              str(self.a.reps)], check=True, capture_output=True,
                             text=True).stdout
        rows = []
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 4 or not cells[1].endswith(("M", "k")):
                continue  # the header, the rule, the preamble
            rows.append(cells)
            self.runs.append({"section": "kernels", "dataset": "dense layer 784-10",
                              "config": cells[0], "workers": 1, "rep": 0,
                              "float_rows_per_second": cells[1], "byte_rows_per_second": cells[2]})
        if not rows:
            raise SystemExit(f"bench_dense_layer printed no table:\n{out}")
        self.table("Dense layer: 784-pixel rows as floats and as bytes (one core, shuffled, "
                   "batch 32)", ["instruction set", "float rows, rows/s", "byte rows, rows/s",
                                 "bytes vs floats"], rows)

    # ---- 7. loading ---------------------------------------------------------------
    def loading(self):
        print("\n== loading: libsvm parse and binary cache")
        prefix = os.path.join(self.data, f"parse-{self.a.parse_rows}")
        svm = prefix + ".train.svm"
        if not os.path.exists(svm):
            subprocess.run([os.path.join(self.build, "bench", "bench_prepare"), "--rows",
                            str(self.a.parse_rows), "--test-rows", "1", "--libsvm", "--out",
                            prefix], check=True, stdout=subprocess.DEVNULL)
        size = os.path.getsize(svm)
        subprocess.run(["cat", svm], stdout=subprocess.DEVNULL, check=True)  # page cache warm
        res = {}
        for rep in range(self.a.reps):
            for what, path, threads in (("parse, 1 thread", svm, 1), ("parse, 2 threads", svm, 2),
                                        ("binary cache open", prefix + ".train.cache", 1)):
                out = subprocess.run([self.data_bin, "info", path, "--threads", str(threads)],
                                     check=True, capture_output=True, text=True).stdout
                secs = float(re.search(r"loaded in:\s+([0-9.]+)", out).group(1))
                res.setdefault(what, []).append(secs)
                self.runs.append({"section": "loading", "dataset": os.path.basename(path),
                                  "config": what, "workers": threads, "rep": rep,
                                  "train_seconds": secs, "bytes": size})
        rows = [[w, f"{size / 2**20:.0f} MiB libsvm", f"{median(s):.3f} s",
                 f"{size / 2**20 / median(s):.0f} MB/s" if "parse" in w else "-"]
                for w, s in res.items()]
        self.table("Loading", ["what", "input", "median time", "text throughput"], rows)

    # ---- sparse or dense rows: the crossover behind --storage auto ------------------
    def density(self):
        print("\n== density: the same rows stored sparse, as dense bytes and as dense floats")
        a = self.a
        images = f"{a.fashion_mnist}/train-images-idx3-ubyte.gz"
        if not os.path.exists(images) or "--storage" not in self.flags:
            self.note(f"no {images} or no --storage: the density section is skipped")
            return
        prefix = os.path.join(self.data, f"density-{a.density_rows}")
        if not all(os.path.exists(f"{prefix}-{d}.u8.cache") for d in a.densities):
            out = subprocess.run([os.path.join(self.build, "bench", "bench_density_data"),
                                  "--images", images, "--rows", str(a.density_rows), "--densities",
                                  ",".join(map(str, a.densities)), "--out", prefix],
                                 check=True, capture_output=True, text=True).stdout
            print(out, end="")
        # Examples per run: each run lasts about a second at the slower storage.
        cases = [("softmax", ("sparse", "u8", "f32"), 360000, {}),
                 ("mlp", ("sparse", "u8", "f32"), a.density_mlp_samples, {"hidden": "256,128"}),
                 ("logistic", ("sparse", "f32"), 360000, {})]
        workers = [n for n in (1, 2) if n in self.workers]
        for rep in range(a.density_reps):
            for d in a.densities:
                for model, kinds, samples, extra in cases:
                    for n in workers:
                        for kind in kinds:
                            binary = ".bin" if model == "logistic" else ""
                            r = self.train(dict({
                                "train": f"{prefix}-{d}{binary}.{kind}.cache", "model": model,
                                "mode": "hogwild", "workers": n, "batch": 32, "lr": 0.1,
                                "epochs": max(1, -(-samples // a.density_rows)), "seed": rep + 1,
                                "storage": "sparse" if kind == "sparse" else "dense"}, **extra))
                            self.record("density", f"{model}@{d}", kind, n, rep, r)
        rows, cross = [], []
        for model, kinds, *_ in cases:
            for n in workers:
                wins = []
                for d in a.densities:
                    k = dict(section="density", dataset=f"{model}@{d}", workers=n)
                    rate = {c: self.med("samples_per_second", config=c, **k) for c in kinds}
                    vs = {c: self.ratio("samples_per_second", dict(k, config=c),
                                        dict(k, config="sparse")) for c in kinds}
                    dense = "u8" if "u8" in kinds else "f32"
                    wins.append((d, vs[dense]))
                    rows.append([model, n, d, fmt_rate(rate["sparse"]),
                                 fmt_rate(rate.get("u8")) if "u8" in kinds else "-",
                                 fmt_rate(rate["f32"]),
                                 fmt(vs.get("u8"), ".2f") + "x" if "u8" in kinds else "-",
                                 fmt(vs["f32"], ".2f") + "x"])
                # The crossover: the lowest density from which dense is never slower.
                at = next((d for i, (d, _) in enumerate(wins)
                           if all(v is not None and v >= 1 for _, v in wins[i:])), None)
                cross.append([model, n, "dense bytes" if "u8" in kinds else "dense floats",
                              "never" if at is None else f">= {at}"])
        self.table(f"Sparse or dense rows: Fashion-MNIST ({a.density_rows} rows) with pixels "
                   "below a cut zeroed (or zeros set to 1/255 above its own density 0.50), "
                   f"hogwild, batch 32, lr 0.1, {a.density_reps} interleaved repetitions; "
                   "examples/s and dense against sparse in the same repetition (logistic: "
                   "binary labels, class >= 5)",
                   ["model", "workers", "density", "sparse", "dense bytes", "dense floats",
                    "bytes / sparse", "floats / sparse"], rows)
        self.table("Crossover: lowest measured density from which dense rows are never slower "
                   "than sparse ones", ["model", "workers", "dense form", "dense wins at density"],
                   cross)

    # ---- libsvm text against IDX for the same images, beside PyTorch ----------------
    def libsvm_text(self, idx, out):
        """Fashion-MNIST IDX as LIBSVM's data page serves such sets: values scaled to
        [0, 1] and printed with "%g" (6 significant digits: 0.0117647), zeros omitted,
        1-based indices."""
        if os.path.exists(out):
            return
        import gzip
        table = [f" {{}}:{k / 255:g}" for k in range(256)]
        with gzip.open(idx) as f:
            raw = f.read()
        with gzip.open(idx.replace("images-idx3", "labels-idx1")) as f:
            labels = f.read()[8:]
        n, r, c = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
        cols = r * c
        with open(out + ".tmp", "w") as f:
            for i in range(n):
                row = raw[16 + i * cols:16 + (i + 1) * cols]
                f.write(str(labels[i]) + "".join(table[b].format(j + 1)
                                                 for j, b in enumerate(row) if b) + "\n")
        os.replace(out + ".tmp", out)

    def formats(self):
        print("\n== formats: Fashion-MNIST from libsvm text and from IDX, beside PyTorch")
        a = self.a
        fm = a.fashion_mnist
        idx = {p: f"{fm}/{p}-images-idx3-ubyte.gz" for p in ("train", "t10k")}
        if not os.path.exists(idx["train"]) or "--storage" not in self.flags:
            self.note(f"no {idx['train']} or no --storage: the formats section is skipped")
            return
        svm = {p: os.path.join(self.data, f"fashion-mnist.{p}.svm") for p in idx}
        for p in idx:
            self.libsvm_text(idx[p], svm[p])
        try:
            subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True,
                           capture_output=True)
            torch = True
        except subprocess.CalledProcessError:
            torch = False
            self.note("python3-torch is not installed: the formats section runs without PyTorch")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        n = min(2, self.workers[-1])
        base = {"mode": "hogwild", "workers": n, "batch": 32, "epochs": 3, "lr": 0.1}
        forms = [("libsvm text, auto", svm, "auto"), ("libsvm text, sparse", svm, "sparse"),
                 ("IDX", idx, "auto")]
        models = [("softmax", {}), ("mlp", {"hidden": "256,128"})]
        for rep in range(a.format_reps):
            for model, extra in models:
                if torch:
                    # PyTorch reads IDX: its rows are the same floats either way, and
                    # its figure excludes loading.
                    cmd = ["/usr/bin/python3", os.path.join(HERE, "compare", "torch_hogwild.py"),
                           "--model", model, "--train", idx["train"], "--test", idx["t10k"],
                           "--workers", str(n), "--batch", "32", "--epochs", "3", "--lr", "0.1",
                           "--seed", str(rep + 1)]
                    cmd += [x for k, v in extra.items() for x in ("--" + k, v)]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                         env=env).stdout
                    self.record("formats", model, "pytorch", n, rep, json.loads(out.splitlines()[-1]))
                for form, files, storage in forms:
                    r = self.train(dict(base, train=files["train"], test=files["t10k"],
                                        model=model, storage=storage, seed=rep + 1, **extra))
                    self.record("formats", model, form, n, rep, r)
        rows = []
        target = {"softmax": 5, "mlp": 3}
        for model, _ in models:
            k = dict(section="formats", dataset=model, workers=n)
            for form, *_ in forms:
                h = dict(k, config=form)
                vs_idx = self.ratio("samples_per_second", h, dict(k, config="IDX"))
                vs_torch = self.ratio("samples_per_second", h, dict(k, config="pytorch"))
                judged = "sparse" not in form  # forced sparse rows: the reference
                rows.append([model, form, fmt_rate(self.med("samples_per_second", **h)),
                             fmt(vs_idx, ".2f") + "x" + (
                                 "" if form == "IDX" or vs_idx is None or not judged
                                 else " (ok)" if vs_idx >= 0.9 else " (target >= 0.9)"),
                             fmt(vs_torch, ".1f") + "x" + (
                                 "" if vs_torch is None or not judged
                                 else " (ok)" if vs_torch >= target[model]
                                 else f" (target >= {target[model]})"),
                             fmt(self.med("test_accuracy", **h), ".4f")])
            t = dict(k, config="pytorch")
            if self.select(**t):
                rows.append([model, "PyTorch (IDX)", fmt_rate(self.med("samples_per_second", **t)),
                             "-", "1x", fmt(self.med("test_accuracy", **t), ".4f")])
        self.table(f"File formats: Fashion-MNIST as libsvm text (LIBSVM's \"%g\" values) and as "
                   f"IDX, hogwild x{n}, batch 32, 3 epochs, lr 0.1, fp32 (MLP 784-256-128-10); "
                   "ratios from the same repetition",
                   ["model", "data", "examples/s", "vs IDX", "vs PyTorch", "accuracy"], rows)

    # ---- output -------------------------------------------------------------------
    def plots(self):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.note("matplotlib is not installed: no plots (scripts/install-bench-deps.sh)")
            return
        for name in [d for d in self.datasets if self.select(section="scaling", dataset=d)]:
            fig, ax = plt.subplots(figsize=(6, 4))
            s = dict(section="scaling", dataset=name)
            one = self.med("samples_per_second", config="serial", **s)
            for cfg in sorted({r["config"] for r in self.select(**s)} - {"serial"}):
                xs = [n for n in self.workers if self.select(config=cfg, workers=n, **s)]
                ax.plot(xs, [self.med("samples_per_second", config=cfg, workers=n, **s) / one
                             for n in xs], marker="o", label=cfg,
                        linestyle="--" if cfg == "ceiling" else "-")
            ax.plot(self.workers, self.workers, color="grey", linewidth=0.5, label="linear")
            ax.set(xlabel="workers", ylabel="examples/s relative to serial",
                   title=f"Speedup on {name}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(os.path.join(self.out, f"speedup-{name}.png"), dpi=110)
            plt.close(fig)

            fig, ax = plt.subplots(figsize=(6, 4))
            nmax = self.workers[-1]
            for cfg in ["serial"] + [c for c, _ in self.configs()]:
                rs = self.select(config=cfg, workers=1 if cfg == "serial" else nmax, rep=0, **s)
                if rs and rs[0]["curve"]:
                    pts = [(t, l) for t, l in rs[0]["curve"] if l is not None]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                            label=cfg + ("" if cfg == "serial" else f" x{nmax}"))
            serial_loss = self.med("test_loss", config="serial", **s)
            if serial_loss:
                ax.axhline(serial_loss * 1.01, color="grey", linestyle=":", linewidth=1,
                           label="target (1.01 x serial)")
            ax.set(xlabel="wall time (s)", ylabel="test loss", title=f"Test loss on {name}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(os.path.join(self.out, f"loss-vs-time-{name}.png"), dpi=110)
            plt.close(fig)

    def write(self):
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump({"quick": self.a.quick, "cpu": cpu_name(), "cores": os.cpu_count(),
                       "load": os.getloadavg(),
                       "notes": self.notes, "runs": self.runs}, f, indent=1)
        keys = ["section", "dataset", "config", "workers", "rep", "samples_per_second",
                "nnz_per_second", "train_seconds", "test_loss", "test_accuracy", "test_rmse",
                "peak_rss_bytes", "pss_tree_bytes"]
        with open(os.path.join(self.out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.runs)
        with open(os.path.join(self.out, "tables.md"), "w") as f:
            f.write(f"# hogwild bench ({'quick' if self.a.quick else 'full'}), {cpu_name()}, "
                    f"{os.cpu_count()} cores, {self.a.reps} interleaved repetitions, medians\n\n")
            for title, md in self.tables:
                f.write(f"## {title}\n\n{md}\n")
            for n in self.notes:
                f.write(f"- {n}\n")


def main():
    p = argparse.ArgumentParser(description="hogwild performance suite (see bench/run.sh)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench-out"))
    p.add_argument("--quick", action="store_true", help="the < 5 minute form")
    p.add_argument("--max-workers", type=int, default=0, help="default: the core count")
    p.add_argument("--pin", action="store_true", help="pass --pin to multi-worker runs")
    p.add_argument("--only", default="", help="comma-separated sections to run")
    p.add_argument("--shared-data", default=os.environ.get(
        "HOGWILD_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data")))
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--rows", type=int, default=500000, help="RCV1-like training rows")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    a = p.parse_args()
    q = a.quick
    a.peer_reps = 1 if q else 3
    a.epochs = 3 if q else 10
    a.spam_epochs = 100 if q else 200
    a.parse_rows = 100000 if q else 1100000
    a.hot_k, a.hot_flush = 4096, 512
    a.peer_merge_every = 256
    a.densities = [0.05, 0.1, 0.2, 0.35, 0.5] if q else [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75]
    a.density_rows = 20000 if q else 60000
    a.density_mlp_samples = 40000 if q else 120000
    a.density_reps = min(a.reps, 2) if q else a.reps
    a.format_reps = a.reps
    a.ratings = 500000 if q else 2000000
    # Quick: 3 epochs, so the step size must fall fast for serial's final loss (the
    # target) to be stable from seed to seed.
    a.rcv_lr, a.rcv_decay = (1.0, 0.3) if q else (0.5, 0.7)
    s = Suite(a)
    only = set(filter(None, a.only.split(",")))
    want = lambda x: not only or x in only  # noqa: E731
    t0 = time.time()
    print(f"hogwild bench ({'quick' if q else 'full'}): {cpu_name()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}, workers {s.workers}, out {s.out}", flush=True)
    s.prepare(sparse=want("yardstick") or want("scaling") or want("partition") or want("ddp")
              or want("ps") or want("science") or want("paper"))
    if want("yardstick"):
        s.yardstick()
    if want("scaling"):
        s.scaling("rcv1like", a.epochs)
        if s.have_spam:
            s.scaling("spam", a.spam_epochs, with_ceiling=True)
        s.memory()
    if want("partition"):
        s.partition()
    if want("ratings"):
        s.ratings()
    if want("peers"):
        s.peers()
    if want("kernels"):
        s.kernels()
    if want("loading"):
        s.loading()
    if want("density"):
        s.density()
    if want("formats"):
        s.formats()
    if want("ddp"):
        suite_ddp.run(s)
    if want("ps"):
        suite_ddp.ps_sweep(s)
    if want("science"):
        suite_science.run(s)
    if want("paper"):
        suite_paper.run(s)
    if want("gpu"):
        suite_gpu.run(s)
    s.yardstick_table()  # after scaling, whose runs give hogwild_train's accuracy
    s.plots()
    s.write()
    shutil.rmtree(s.tmp, ignore_errors=True)  # the per-run summaries, now in results.json
    print(f"\nwrote {s.out}/tables.md, results.json, results.csv and plots "
          f"in {time.time() - t0:.0f} s (load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    sys.exit(main())
