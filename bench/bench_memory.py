#!/usr/bin/python3
"""The memory a run estimates before its first epoch against the peak it reports and
the peak measured from outside (issue 31, must-have 2).

Runs hogwild_train on cases that hold hundreds of MiB (MF with millions of users,
softmax, an MLP, a parameter server, ddp), each a few seconds of training, and for
each prints the estimate (memory_estimate_bytes), the tool's reported peak
(peak_rss_bytes: its processes' anonymous and shared-memory pages, shared ones once)
and an independent measurement of the whole process tree: the run goes into a child
memory cgroup (v1, /sys/fs/cgroup/memory; root needed), whose rss + shmem is sampled
every 5 ms, and whose memory.max_usage_in_bytes, less the page cache its outputs left
(the checkpoint), bounds the peak from below. The inputs are read into the page cache
first, from outside the cgroup, so that their cache is not charged to the run.
Without the cgroup, the independent column is left out.

  /usr/bin/python3 bench/bench_memory.py [--build build] [--quick] [--work DIR]

--quick: tiny sizes, a smoke test (meson test bench_memory): every case runs and
reports both figures; no ratio is checked. Prints the CPU (/proc/cpuinfo) and the
table; exits 1 when --check is given and a case's estimate is off the measured peak
by more than 20 %.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from suite import cpu_name  # bench/suite.py: the model and its vector units

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 2 ** 20


def memory_cgroup():
    """This process's memory cgroup (v1) directory, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    d = "/sys/fs/cgroup/memory" + path
                    return d if os.access(d, os.W_OK) else None
    except OSError:
        pass
    return None


def write_libsvm(path, rows, classes, features, nnz, dense, seed):
    """Multi-class rows: a class's rows favour its own features (softmax, MLP)."""
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            y = rng.randrange(classes)
            if dense:
                vals = [rng.gauss(0.3 if j % classes == y else 0, 1) for j in range(features)]
                f.write(f"{y} " + " ".join(f"{j + 1}:{v:.3f}" for j, v in enumerate(vals)) + "\n")
            else:
                idx = sorted({(rng.randrange(features // classes) * classes + y) % features
                              for _ in range(nnz)})
                f.write(f"{y} " + " ".join(f"{j + 1}:1" for j in idx) + "\n")


def generate(tools, work, quick):
    """The cases' data files (in `work`, kept from an earlier run there) and arguments."""
    def data(*a):
        if not os.path.exists(a[a.index("--out") + 1]):
            subprocess.run([os.path.join(tools, "hogwild_data"), "generate", *a], check=True,
                           capture_output=True)
    users, ratings = (20000, 40000) if quick else (10_000_000, 10_000_000)
    mf = os.path.join(work, "ratings.tsv")
    data("--kind", "ratings", "--users", str(users), "--items", "10000", "--ratings", str(ratings),
         "--test-ratings", "0", "--out", mf)
    sm_features = 40000 if quick else 4_000_000
    sm_train, sm_test = os.path.join(work, "softmax.train"), os.path.join(work, "softmax.test")
    write_libsvm(sm_train, 2000 if quick else 20000, 10, sm_features, 30, False, 1)
    write_libsvm(sm_test, 200 if quick else 2000, 10, sm_features, 30, False, 2)
    mlp_train, mlp_test = os.path.join(work, "dense.train"), os.path.join(work, "dense.test")
    write_libsvm(mlp_train, 200 if quick else 1000, 10, 64 if quick else 256, 0, True, 3)
    write_libsvm(mlp_test, 50 if quick else 200, 10, 64 if quick else 256, 0, True, 4)
    ps_features = 100000 if quick else 16_000_000
    ps_train, ps_test = os.path.join(work, "sparse.train"), os.path.join(work, "sparse.test")
    data("--rows", "2000" if quick else "20000", "--features", str(ps_features), "--seed", "5",
         "--out", ps_train)
    data("--rows", "500" if quick else "2000", "--features", str(ps_features), "--seed", "6",
         "--out", ps_test)
    hidden = "256,256" if quick else "4096,4096"
    count = lambda n: f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"
    return [
        (f"MF, {count(users)} users, serial, --checkpoint",
         [mf], ["--train", mf, "--model", "mf", "--mode", "serial", "--epochs", "1",
                "--checkpoint", os.path.join(work, "mf.ck")]),
        (f"softmax, {count(sm_features)} features x 10 classes, hogwild x2",
         [sm_train, sm_test], ["--train", sm_train, "--test", sm_test, "--model", "softmax",
                               "--mode", "hogwild", "--workers", "2", "--epochs", "1"]),
        (f"MLP {hidden}, hogwild x2, batch 32",
         [mlp_train, mlp_test], ["--train", mlp_train, "--test", mlp_test, "--model", "mlp",
                                 "--hidden", hidden, "--mode", "hogwild", "--workers", "2",
                                 "--batch", "32", "--epochs", "1"]),
        (f"logistic, {count(ps_features)} features, ps x2 + 1 server",
         [ps_train, ps_test], ["--train", ps_train, "--test", ps_test, "--model", "logistic",
                               "--mode", "ps", "--workers", "2", "--servers", "1",
                               "--epochs", "1"]),
        (f"MLP {hidden}, ddp x2, batch 64",
         [mlp_train, mlp_test], ["--train", mlp_train, "--test", mlp_test, "--model", "mlp",
                                 "--hidden", hidden, "--mode", "ddp", "--workers", "2",
                                 "--batch", "64", "--epochs", "1"]),
    ]


class Cgroup:
    """A child memory cgroup that one run goes into; its peak, sampled and recorded."""

    def __init__(self, parent, name):
        self.path = os.path.join(parent, name)
        os.mkdir(self.path)
        self.sampled = 0
        self._stop = False

    def stat(self):
        with open(os.path.join(self.path, "memory.stat")) as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    def _sample(self):
        while not self._stop:
            s = self.stat()
            self.sampled = max(self.sampled, s["total_rss"] + s["total_shmem"])
            time.sleep(0.005)

    def run(self, argv):
        t = threading.Thread(target=self._sample)
        t.start()
        # The shell joins the cgroup, then becomes hogwild_train: every process of
        # the run is in it from the start.
        cmd = f'echo $$ > {self.path}/cgroup.procs && exec "$@"'
        try:
            r = subprocess.run(["/bin/sh", "-c", cmd, "sh", *argv], capture_output=True, text=True)
        finally:
            time.sleep(0.02)
            self._stop = True
            t.join()
        with open(os.path.join(self.path, "memory.max_usage_in_bytes")) as f:
            self.max_usage = int(f.read())
        s = self.stat()
        self.left_cache = s["total_cache"] - s["total_shmem"]  # the outputs' pages
        return r

    def remove(self):
        try:
            with open(os.path.join(self.path, "memory.force_empty"), "w") as f:
                f.write("0")
        except OSError:
            pass
        os.rmdir(self.path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    p.add_argument("--check", action="store_true", help="exit 1 if an estimate misses by > 20 %%")
    p.add_argument("--work", help="keep the data here (default: a temporary directory, removed)")
    a = p.parse_args()
    tools = os.path.join(a.build, "src")
    work = a.work or tempfile.mkdtemp(prefix="hogwild-bench-memory-")
    os.makedirs(work, exist_ok=True)
    cg_parent = memory_cgroup()
    print(f"bench_memory: {cpu_name()}, {os.cpu_count()} cores"
          + ("" if cg_parent else "; no writable memory cgroup (v1): the independent measure is left out"),
          flush=True)
    rows, failed = [], False
    try:
        for name, inputs, args in generate(tools, work, a.quick):
            for f in inputs:  # their page cache is charged here, not to the run
                with open(f, "rb") as fh:
                    while fh.read(1 << 24):
                        pass
            summary = os.path.join(work, "summary.json")
            argv = [os.path.join(tools, "hogwild_train"), *args, "--summary", summary, "-q"]
            cg = Cgroup(cg_parent, f"hogwild-bench-{os.getpid()}") if cg_parent else None
            t0 = time.time()
            try:
                r = cg.run(argv) if cg else subprocess.run(argv, capture_output=True, text=True)
            finally:
                if cg:
                    cg.remove()
            if r.returncode != 0:
                print(f"{name}: hogwild_train exited {r.returncode}\n{r.stdout}{r.stderr}")
                failed = True
                continue
            with open(summary) as f:
                s = json.load(f)
            est, peak = s["memory_estimate_bytes"], s["peak_rss_bytes"]
            measured = max(cg.sampled, cg.max_usage - cg.left_cache) if cg else None
            rows.append((name, est, peak, measured, cg.max_usage if cg else None, time.time() - t0))
            for x in ("checkpoint",):
                if s.get(x) and os.path.exists(s[x]):
                    os.remove(s[x])
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    fmt = lambda b: "-" if b is None else f"{b / MiB:.0f} MiB"
    ratio = lambda x, y: "-" if x is None or not y else f"{x / y:.2f}"
    print("\n| case | estimate | reported peak | measured peak (cgroup) | estimate / measured "
          "| reported / measured | cgroup max_usage | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name, est, peak, measured, usage, secs in rows:
        print(f"| {name} | {fmt(est)} | {fmt(peak)} | {fmt(measured)} | {ratio(est, measured)} "
              f"| {ratio(peak, measured)} | {fmt(usage)} | {secs:.0f} |")
        if a.check and measured and abs(est / measured - 1) > 0.2:
            failed = True
    print("\nmeasured peak: the cgroup's rss + shmem sampled every 5 ms, or its max_usage less "
          "the page cache of the files the run wrote, whichever is larger")
    if len(rows) != 5 or any(r[1] <= 0 or r[2] <= 0 for r in rows):
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
