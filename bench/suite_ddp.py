"""bench/run.sh's `ddp` section (bench/suite.py calls run(suite)): the synchronous
modes beside the lock-free ones.

- The all-reduce table: bench_allreduce's nccl-tests columns for each backend
  built, 2 and 4 ranks, with the machine's memcpy rate measured in the same run;
  the targets: shm busbw >= 0.5 x memcpy at 64 MiB with 2 ranks, and shm >= 4 x
  Gloo on loopback at 64 MiB.
- PyTorch DDP side by side (compare/torch_ddp.py: Gloo on CPU, DistributedSampler,
  per-rank batch 32, index_select batches, OpenBLAS single-threaded) against
  hogwild_train --mode ddp with the same data, model, lr and epochs, 2 ranks;
  targets: >= 10x on softmax and >= 3x on the MLP (examples/s), accuracy no worse
  by more than 0.5 points.
- The comparison table the product exists for: serial, hogwild, atomic, lock, ddp
  and dp on Fashion-MNIST (softmax, MLP), SpamAssassin and RCV1-like, with
  throughput, time to a target test loss (1.01 x serial's final) and final
  accuracy, and a plot of test loss against time, one curve per mode.
- 2 nodes x 1 worker against 1 node x 2 workers on this machine (loopback): the
  cost of going through Gloo, for ddp, hogwild across nodes and ps.
- (Its own section, `ps`: ps_sweep.) The parameter server swept: --push-every,
  --fetch-every and --staleness on SpamAssassin (or RCV1-like), with the staleness
  each run measured.
"""
import json
import os
import shutil
import subprocess
import tempfile

MODES = ["serial", "hogwild", "atomic", "lock", "ddp", "dp", "ps"]
# The parameter server in the comparison table: one server beside the replicas,
# pushing every mini-batch and fetching every fourth (Downpour's n_push, n_fetch).
PS = {"servers": 1, "push-every": 1, "fetch-every": 4}
# MF's factor tensors are dense: a push scans them whole (only the linear models on
# sparse rows push just the touched keys), so MF pushes every 64 ratings.
PS_MF = {"servers": 1, "push-every": 1, "fetch-every": 4}  # mini-batches of 64 ratings


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def median_time_to(s, rs, target):
    """The median over runs rs of the time each took to reach test loss `target`,
    or None when one of them never did."""
    times = [s.time_to(r, target) for r in rs] if target else []
    reached = [t for t in times if t is not None]
    return sorted(reached)[len(reached) // 2] if len(reached) == len(times) and reached else None


def allreduce(s):
    a = s.a
    out = s.tmpfile("allreduce") + ".json"
    cmd = [os.path.join(s.build, "bench", "bench_allreduce"), "--ranks", "2,4",
           "--max", "64M" if a.quick else "256M", "--budget", "0.1" if a.quick else "0.3",
           "--json", out]
    print("\n== all-reduce (" + " ".join(cmd[1:]) + ")", flush=True)
    subprocess.run(cmd, check=True)
    with open(out) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    copy = lines[0]["memcpy_GBps"]
    rows = [x for x in lines[1:]]
    table = []
    for r in rows:
        if r["bytes"] < 4096 * 16 and r["bytes"] != 4096:
            continue  # 4 KiB, then every step from 64 KiB
        table.append([r["backend"], r["ranks"], r["bytes"], r["bytes"] // 4,
                      fmt(r["seconds"] * 1e6, ".1f"), fmt(r["algbw_GBps"]), fmt(r["busbw_GBps"]),
                      r["wrong"], fmt(r["busbw_GBps"] / copy)])
    s.table(f"All-reduce, float sum (nccl-tests columns; memcpy {copy:.2f} GB/s in the same run)",
            ["backend", "ranks", "size (B)", "count", "time (us)", "algbw (GB/s)",
             "busbw (GB/s)", "#wrong", "busbw / memcpy"], table)
    at = {(r["backend"], r["ranks"]): r for r in rows if r["bytes"] == 64 << 20}
    shm2 = at.get(("shm", 2))
    if shm2:
        s.note(f"all-reduce at 64 MiB, 2 ranks: shm busbw {shm2['busbw_GBps']:.2f} GB/s = "
               f"{shm2['busbw_GBps'] / copy:.2f} x memcpy (target >= 0.5)")
    for n in (2, 4):
        if ("shm", n) in at and ("gloo", n) in at:
            s.note(f"all-reduce at 64 MiB, {n} ranks: shm / gloo (loopback) = "
                   f"{at[('shm', n)]['algbw_GBps'] / at[('gloo', n)]['algbw_GBps']:.1f}x "
                   f"(target >= 4)")
    s.runs.append({"section": "allreduce", "dataset": "", "config": "memcpy", "workers": 1,
                   "rep": 0, "curve": [], "memcpy_GBps": copy, "rows": rows})


def torch_ddp(s):
    a = s.a
    try:
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        s.note("python3-torch is not installed: the PyTorch DDP comparison is skipped "
               "(scripts/install-bench-deps.sh)")
        return
    fm = a.fashion_mnist
    epochs = 1 if a.quick else 3
    cases = [("softmax", 0.1, {}), ("mlp", 0.05, {"hidden": "256,128"})]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    here = os.path.dirname(os.path.abspath(__file__))
    print("\n== side by side with PyTorch DistributedDataParallel (Gloo, CPU), 2 ranks", flush=True)
    for rep in range(a.peer_reps):
        for model, lr, extra in cases:
            tr, te = f"{fm}/train-images-idx3-ubyte.gz", f"{fm}/t10k-images-idx3-ubyte.gz"
            cmd = ["/usr/bin/python3", os.path.join(here, "compare", "torch_ddp.py"),
                   "--model", model, "--train", tr, "--test", te, "--workers", "2",
                   "--batch", "32", "--epochs", str(epochs), "--lr", str(lr), "--seed", str(rep + 1)]
            cmd += [x for k, v in extra.items() for x in ("--" + k, v)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            s.record("torch_ddp", model, "pytorch ddp", 2, rep, json.loads(out.splitlines()[-1]))
            r = s.train(dict({"train": tr, "test": te, "model": model, "mode": "ddp", "workers": 2,
                              "batch": 32, "epochs": epochs, "lr": lr, "seed": rep + 1}, **extra))
            s.record("torch_ddp", model, "hogwild ddp", 2, rep, r)
    rows = []
    for model, _, _ in cases:
        k = dict(section="torch_ddp", dataset=model)
        ratio = s.ratio("samples_per_second", dict(k, config="hogwild ddp"),
                        dict(k, config="pytorch ddp"))
        ours, theirs = (s.med("test_accuracy", config=c, **k) for c in ("hogwild ddp", "pytorch ddp"))
        target = 10 if model == "softmax" else 3
        rows.append([model, fmt(s.med("samples_per_second", config="pytorch ddp", **k), ".0f"),
                     fmt(s.med("samples_per_second", config="hogwild ddp", **k), ".0f"),
                     fmt(ratio) + "x", f">= {target}x", fmt(theirs, ".4f"), fmt(ours, ".4f"),
                     fmt((ours - theirs) * 100 if ours is not None and theirs is not None else None,
                         "+.2f")])
    s.table(f"PyTorch DDP (Gloo, CPU) and hogwild_train --mode ddp, Fashion-MNIST, 2 ranks, "
            f"batch 32 per rank, {epochs} epoch(s)",
            ["model", "PyTorch examples/s", "ours examples/s", "ours / PyTorch", "target",
             "PyTorch accuracy", "our accuracy", "points"], rows)


def modes(s):
    a = s.a
    fm = a.fashion_mnist
    n = 2
    cases = [("fmnist softmax", {"train": f"{fm}/train-images-idx3-ubyte.gz",
                                 "test": f"{fm}/t10k-images-idx3-ubyte.gz", "model": "softmax",
                                 "batch": 32, "lr": 0.1, "epochs": 2 if a.quick else 5}),
             ("fmnist mlp", {"train": f"{fm}/train-images-idx3-ubyte.gz",
                             "test": f"{fm}/t10k-images-idx3-ubyte.gz", "model": "mlp",
                             "hidden": "256,128", "batch": 32, "lr": 0.05,
                             "epochs": 1 if a.quick else 3})]
    if s.have_spam:
        spam = os.path.join(a.shared_data, "spamassassin")
        cases.append(("spam", {"train": f"{spam}/spam.train.svm.gz",
                               "test": f"{spam}/spam.test.svm.gz", "model": "logistic",
                               "batch": 8, "lr": 0.5, "epochs": 10 if a.quick else 30}))
    if "rcv1like" in s.datasets:
        d = s.datasets["rcv1like"]
        cases.append(("rcv1like", {"train": d["train"], "test": d["test"], "model": "logistic",
                                   "batch": 8, "lr": d["lr"], "lr-decay": d["lr-decay"],
                                   "epochs": a.epochs}))
    if s.ratings_data():
        d = s.datasets["ratings"]
        # Mini-batches of 64 ratings: ddp's and dp's steps all-reduce the dense factor
        # tensors whole, and at batch 1 they would take minutes.
        cases.append(("ratings mf", dict({"train": d["train"], "test": d["test"], "lr": d["lr"],
                                          "lr-decay": d["lr-decay"], "epochs": a.epochs,
                                          "batch": 64}, **d["extra"])))
    reps = 1 if a.quick else a.reps
    print(f"\n== the modes side by side ({n} workers, {reps} interleaved repetition(s))", flush=True)
    for rep in range(reps):
        for name, base in cases:
            for mode in MODES:
                o = dict(base, mode=mode, workers=1 if mode == "serial" else n, seed=rep + 1,
                         **(PS_MF if mode == "ps" and name == "ratings mf" else
                            PS if mode == "ps" else {}))
                s.record("modes", name, mode, o["workers"], rep, s.train(o))
    for name, _ in cases:
        k = dict(section="modes", dataset=name)
        serial_loss = s.med("test_loss", config="serial", **k)
        target = serial_loss * 1.01 if serial_loss else None
        rows = []
        for mode in MODES:
            rs = s.select(config=mode, **k)
            if not rs:
                continue
            tt = median_time_to(s, rs, target)
            rows.append([mode, rs[0]["workers"], fmt(s.med("samples_per_second", config=mode, **k), ".0f"),
                         fmt(s.ratio("samples_per_second", dict(k, config=mode),
                                     dict(k, config="serial"))) + "x",
                         fmt(tt) + (" s" if tt is not None else " (not reached)"),
                         fmt(s.med("test_loss", config=mode, **k), ".4f"),
                         fmt(s.med("test_accuracy", config=mode, **k), ".4f")])
        ps = PS_MF if name == "ratings mf" else PS
        s.table(f"The modes on {name} (target test loss {fmt(target, '.4f')} = 1.01 x serial's "
                f"final; ps: 1 server, --push-every {ps['push-every']} --fetch-every "
                f"{ps['fetch-every']})", ["mode", "workers", "examples/s", "vs serial", "time to target",
                            "final test loss", "accuracy"], rows)
    plot(s, [name for name, _ in cases])


def plot(s, names):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        s.note("matplotlib is not installed: no plots of the modes")
        return
    for name in names:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in MODES:
            rs = s.select(section="modes", dataset=name, config=mode, rep=0)
            if rs and rs[0]["curve"]:
                pts = [(t, loss) for t, loss in rs[0]["curve"] if loss is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                        label=f"{mode} x{rs[0]['workers']}")
        ax.set(xlabel="wall time (s)", ylabel="test loss", title=f"Test loss on {name}, by mode")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(s.out, f"modes-loss-vs-time-{name.replace(' ', '-')}.png"), dpi=110)
        plt.close(fig)


def nodes(s):
    """2 nodes x 1 worker against 1 node x 2 workers on this machine (loopback, a
    FileStore in a temporary directory): what going through Gloo costs, for ddp and
    for hogwild across nodes."""
    a = s.a
    fm = a.fashion_mnist
    base = {"train": f"{fm}/train-images-idx3-ubyte.gz", "test": f"{fm}/t10k-images-idx3-ubyte.gz",
            "model": "softmax", "batch": 32, "epochs": 1 if a.quick else 3}
    cases = [("ddp", {"mode": "ddp", "lr": 0.1}, {"mode": "ddp", "lr": 0.1}),
             ("hogwild", {"mode": "hogwild", "lr": 0.1},
              {"mode": "hogwild", "lr": 0.2, "sync-every": 2048}),
             ("ps", dict(PS, mode="ps", lr=0.1), dict(PS, mode="ps", lr=0.1))]
    reps = 1 if a.quick else a.reps
    print("\n== 2 nodes x 1 worker against 1 node x 2 workers (loopback)", flush=True)
    for rep in range(reps):
        for name, one, two in cases:
            s.record("nodes", name, "1 node x 2", 2, rep,
                     s.train(dict(base, workers=2, seed=rep + 1, **one)))
            store = tempfile.mkdtemp(prefix="hogwild-bench-store-")
            files = [(s.tmpfile("summary"), s.tmpfile("metrics")) for _ in range(2)]
            procs = [subprocess.Popen(s.train_cmd(dict(base, workers=1, nodes=2, seed=rep + 1,
                                                       **{"node-rank": k, "rendezvous": "file:" + store},
                                                       **two), *files[k]),
                                      stdout=subprocess.DEVNULL) for k in range(2)]
            for p in procs:
                if p.wait() != 0:
                    raise SystemExit(f"a node failed: {p.args}")
            shutil.rmtree(store, ignore_errors=True)
            rs = [s.read_run(*f) for f in files]
            r = dict(rs[0])
            r["samples_per_second"] = sum(x["samples_per_second"] for x in rs)
            row = s.record("nodes", name, "2 nodes x 1", 2, rep, r)
            row["node_sync_seconds"] = rs[0].get("node_sync_seconds")
            row["train_seconds"] = rs[0].get("train_seconds")
    rows = []
    for name, _, _ in cases:
        k = dict(section="nodes", dataset=name)
        two = s.select(config="2 nodes x 1", **k)
        rows.append([name, fmt(s.med("samples_per_second", config="1 node x 2", **k), ".0f"),
                     fmt(s.med("samples_per_second", config="2 nodes x 1", **k), ".0f"),
                     fmt(s.ratio("samples_per_second", dict(k, config="2 nodes x 1"),
                                 dict(k, config="1 node x 2"))) + "x",
                     fmt(s.med("test_accuracy", config="1 node x 2", **k), ".4f"),
                     fmt(s.med("test_accuracy", config="2 nodes x 1", **k), ".4f"),
                     fmt(two[0].get("node_sync_seconds"), ".2f") + " of " +
                     fmt(two[0].get("train_seconds"), ".2f") + " s" if name == "hogwild" and two else "n/a"])
    s.table("Through Gloo: 2 nodes x 1 worker against 1 node x 2 workers, Fashion-MNIST softmax, "
            "batch 32 (hogwild across nodes: --sync-every 2048, lr x 2; ps: one server a node, "
            "--push-every 1 --fetch-every 4)",
            ["mode", "1 node x 2 (examples/s)", "2 nodes x 1 (examples/s)", "2 nodes / 1 node",
             "accuracy, 1 node", "accuracy, 2 nodes", "node 0's seconds in syncs"], rows)


def ps_sweep(s):
    """--mode ps with its intervals and bound swept, 2 replicas and 1 server, on
    SpamAssassin (RCV1-like without ../shared): throughput, time to serial's loss,
    accuracy and the staleness each run measured."""
    a = s.a
    if s.have_spam:
        spam = os.path.join(a.shared_data, "spamassassin")
        name, base = "spam", {"train": f"{spam}/spam.train.svm.gz", "test": f"{spam}/spam.test.svm.gz",
                              "model": "logistic", "batch": 8, "lr": 0.5,
                              "epochs": 10 if a.quick else 30}
    elif "rcv1like" in s.datasets:
        d = s.datasets["rcv1like"]
        name, base = "rcv1like", {"train": d["train"], "test": d["test"], "model": "logistic",
                                  "batch": 8, "lr": d["lr"], "lr-decay": d["lr-decay"],
                                  "epochs": a.epochs}
    else:
        s.note("no SpamAssassin and no RCV1-like set: no ps sweep")
        return
    grid = [(1, 1, None), (1, 4, None), (4, 4, None), (4, 16, None), (16, 64, None),
            (4, 16, 0), (4, 16, 4)]
    reps = 1 if a.quick else a.reps
    print(f"\n== ps swept on {name} (2 replicas, 1 server)", flush=True)
    ps_of = {}
    for rep in range(reps):
        s.record("ps sweep", name, "serial", 1,  rep, s.train(dict(base, mode="serial", seed=rep + 1)))
        for push, fetch, bound in grid:
            config = f"{push}/{fetch}/{'-' if bound is None else bound}"
            r = s.train(dict(base, mode="ps", workers=2, servers=1, seed=rep + 1,
                             **{"push-every": push, "fetch-every": fetch, "staleness": bound}))
            s.record("ps sweep", name, config, 2, rep, r)
            ps_of.setdefault(config, r.get("ps") or {})
    k = dict(section="ps sweep", dataset=name)
    serial_loss = s.med("test_loss", config="serial", **k)
    target = serial_loss * 1.01 if serial_loss else None
    rows = []
    for config in ["serial"] + [f"{p}/{f}/{'-' if b is None else b}" for p, f, b in grid]:
        rs = s.select(config=config, **k)
        if not rs:
            continue
        tt = median_time_to(s, rs, target)
        p = ps_of.get(config, {})
        rows.append([config, fmt(s.med("samples_per_second", config=config, **k), ".0f"),
                     fmt(s.ratio("samples_per_second", dict(k, config=config),
                                 dict(k, config="serial"))) + "x",
                     fmt(tt) + (" s" if tt is not None else " (not reached)"),
                     fmt(s.med("test_accuracy", config=config, **k), ".4f"),
                     fmt(p.get("staleness_at_push_mean")) + " / " + str(p.get("staleness_at_push_max", "n/a"))
                     if p else "",
                     fmt(p.get("staleness_at_fetch_mean")) + " / " + str(p.get("staleness_at_fetch_max", "n/a"))
                     if p else "",
                     fmt(p["bytes_pushed"] / 2**20, ".1f") if p else ""])
    s.table(f"ps on {name}, 2 replicas x 1 server: push every / fetch every / staleness bound "
            f"(target test loss {fmt(target, '.4f')} = 1.01 x serial's final)",
            ["push/fetch/bound", "examples/s", "vs serial", "time to target", "accuracy",
             "staleness at push mean / max", "at fetch mean / max", "MiB pushed"], rows)

    # Key ranges: 2 servers, contiguous slices or hashed keys; the load is the
    # coordinates each server applied.
    print(f"\n== ps key ranges on {name} (2 replicas, 2 servers)", flush=True)
    loads = {}
    for rep in range(reps):
        for ranges in ("contiguous", "hashed"):
            r = s.train(dict(base, mode="ps", workers=2, servers=2, seed=rep + 1,
                             **{"push-every": 4, "fetch-every": 16, "staleness": 4,
                                "key-ranges": ranges}))
            s.record("ps key ranges", name, ranges, 2, rep, r)
            loads.setdefault(ranges, (r.get("ps") or {}).get("server_keys"))
    k = dict(section="ps key ranges", dataset=name)
    rows = []
    for ranges in ("contiguous", "hashed"):
        keys = loads.get(ranges) or []
        share = " / ".join(fmt(100 * n / sum(keys), ".1f") for n in keys) if sum(keys) else "n/a"
        rows.append([ranges, fmt(s.med("samples_per_second", config=ranges, **k), ".0f"),
                     fmt(s.med("test_accuracy", config=ranges, **k), ".4f"), share])
    s.table(f"ps on {name}, 2 replicas x 2 servers, push 4 / fetch 16 / bound 4: contiguous "
            f"slices against hashed keys",
            ["key ranges", "examples/s", "accuracy", "% of coordinates per server"], rows)


def run(s):
    allreduce(s)
    torch_ddp(s)
    modes(s)
    nodes(s)
