"""bench/run.sh's `science` section (bench/suite.py calls run(suite)): the
convergence-experiment instruments (docs/EXPERIMENTS.md).

- What --telemetry costs: hogwild with 2 workers on SpamAssassin and RCV1-like,
  without telemetry, with the default sampling (1 update in 64) and with every
  update measured, interleaved repetitions; the ratio of throughputs within each
  repetition, its median over them. Target: <= 3 % at the default sampling.
- The staleness it measures for 1, 2 and 4 workers (4 oversubscribe a 2-core
  machine): lag and overlap quantiles, and the mean lag by update length.
- What the races lose: --conflicts in serial, lock, atomic and hogwild (2
  workers, SpamAssassin): conflicts per sampled write and lost-update mass.
- The Hogwild! paper's Fig. 5c: the speed-up of 2 workers over 1 as the gradient
  gets costlier (--grad-delay-ns), lock-free against a global lock.
"""


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def overhead(s):
    a = s.a
    names = [n for n in ("spam", "rcv1like") if n in s.datasets]
    configs = [("off", {}), ("every 64", {"telemetry": True}),
               ("every 1", {"telemetry": True, "telemetry-every": 1})]
    # Runs of a second or more (shorter ones vary by +-15 % here whatever they
    # measure), 5 rounds, the configurations' order reversed every other round.
    reps = max(a.reps, 5) if not a.quick else 2
    print("\n== what --telemetry costs (hogwild, 2 workers)", flush=True)
    for rep in range(reps):
        for name in names:
            d = s.datasets[name]
            epochs = (200 if name == "spam" else 10) if not a.quick else (40 if name == "spam" else 2)
            base = {"train": d["train"], "test": d["test"], "model": "logistic",
                    "mode": "hogwild", "workers": 2, "epochs": epochs, "lr": d["lr"],
                    "lr-decay": d["lr-decay"], "seed": rep + 1}
            for config, extra in (configs if rep % 2 == 0 else list(reversed(configs))):
                s.record("telemetry", name, config, 2, rep, s.train(dict(base, **extra)))
    rows = []
    for name in names:
        k = dict(section="telemetry", dataset=name)
        off = dict(k, config="off")
        rows.append([name, fmt(s.med("samples_per_second", **off), ".0f")] +
                    [fmt((1 - s.ratio("samples_per_second", dict(k, config=c), off)) * 100, ".1f") + " %"
                     for c in ("every 64", "every 1")])
    s.table("What --telemetry costs: hogwild, 2 workers, throughput lost against the same run "
            f"without it (median of {reps} interleaved repetitions; target <= 3 % at the default, "
            "1 in 64)",
            ["data", "without (examples/s)", "1 in 64 (default)", "every update"], rows)


def staleness(s):
    a = s.a
    if "spam" not in s.datasets:
        s.note("no SpamAssassin: the staleness table is skipped")
        return
    d = s.datasets["spam"]
    print("\n== staleness measured (SpamAssassin, hogwild)", flush=True)
    rows = []
    for workers in (1, 2, 4):
        r = s.train({"train": d["train"], "test": d["test"], "model": "logistic",
                     "mode": "hogwild", "workers": workers, "epochs": 20 if a.quick else 100,
                     "lr": d["lr"], "lr-decay": d["lr-decay"], "telemetry": True})
        st = r["staleness"]
        lag, ov = st["lag"], st["overlap"]
        by = " / ".join(fmt(b["mean_lag"], ".2f") for b in st["lag_by_nnz"])
        rows.append([workers, lag["samples"], fmt(lag["mean"]), lag["p50"], lag["p90"], lag["p99"],
                     lag["max"], fmt(ov["mean"]), ov["p99"], ov["max"], by])
        s.runs.append({"section": "staleness", "dataset": "spam", "config": f"x{workers}",
                       "workers": workers, "rep": 0, "staleness": st,
                       "samples_per_second": r["samples_per_second"], "curve": []})
    s.table("Staleness measured by --telemetry (SpamAssassin, hogwild, lr 0.5; examples of the "
            "other workers; 1 in 64 updates sampled)",
            ["workers", "sampled", "lag mean", "p50", "p90", "p99", "max", "overlap mean",
             "overlap p99", "overlap max", "mean lag by nnz (<50 / 50-150 / 150-500 / 500-2000 / >=2000)"],
            rows)


def delay(s):
    a = s.a
    if "spam" not in s.datasets:
        return
    d = s.datasets["spam"]
    delays = [0, 1000, 10000, 100000]
    reps = 1 if a.quick else a.reps
    print("\n== speed-up against gradient cost (Hogwild! Fig. 5c; SpamAssassin)", flush=True)
    for rep in range(reps):
        for ns in delays:
            epochs = 20 if ns == 0 else max(1, 10000 // ns) if ns < 100000 else 1
            for mode in ("hogwild", "lock"):
                for workers in (1, 2):
                    r = s.train({"train": d["train"], "test": d["test"], "model": "logistic",
                                 "mode": mode if workers > 1 else "hogwild", "workers": workers,
                                 "epochs": epochs, "lr": d["lr"], "lr-decay": d["lr-decay"],
                                 "grad-delay-ns": ns, "seed": rep + 1})
                    s.record("delay", f"{ns} ns", mode, workers, rep, r)
    rows = []
    for ns in delays:
        k = dict(section="delay", dataset=f"{ns} ns")
        rows.append([ns] + [fmt(s.ratio("samples_per_second", dict(k, config=m, workers=2),
                                        dict(k, config=m, workers=1))) + "x"
                            for m in ("hogwild", "lock")])
    s.table("Speed-up of 2 workers over 1 as each gradient costs more (--grad-delay-ns of busy work "
            "per example; SpamAssassin, logistic; the Hogwild! paper's Fig. 5c)",
            ["delay (ns)", "hogwild", "lock"], rows)


def conflicts(s):
    a = s.a
    if "spam" not in s.datasets:
        return
    d = s.datasets["spam"]
    print("\n== conflicts and lost updates (SpamAssassin, 2 workers)", flush=True)
    rows = []
    for mode in ("serial", "lock", "atomic", "hogwild"):
        r = s.train({"train": d["train"], "test": d["test"], "model": "logistic", "mode": mode,
                     "workers": 2, "epochs": 10 if a.quick else 30, "lr": d["lr"],
                     "lr-decay": d["lr-decay"], "conflicts": True})
        c = r["conflicts"]
        s.runs.append({"section": "conflicts", "dataset": "spam", "config": mode, "workers": 2,
                       "rep": 0, "conflicts": c, "samples_per_second": r["samples_per_second"],
                       "curve": []})
        bias = next((x for x in c["coordinates"] if x["why"] == "bias"), None)
        rows.append([mode, f"{c['conflicts']} / {c['writes']}", fmt(100 * c["conflict_rate"], ".3f") + " %",
                     fmt(c["lost_mass_mean"], ".2e"), fmt(c["lost_mass_max"], ".2e"),
                     fmt(bias["lost_mass"], ".2e") if bias else "n/a",
                     fmt(r.get("test_accuracy"), ".4f")])
    s.table("What the races lose: --conflicts on SpamAssassin, 2 workers (bias, top 16 features, "
            "16 random)",
            ["mode", "conflicts / sampled writes", "rate", "lost mass mean", "lost mass max",
             "bias's lost mass", "test accuracy"], rows)


def run(s):
    overhead(s)
    staleness(s)
    conflicts(s)
    delay(s)
