#!/usr/bin/python3
"""hogwild_sweep and hogwild_plot end to end (meson test 'study'):

- a tiny grid (logistic: workers 1, 2 x serial, hogwild, atomic, lock x two
  step sizes, one of which (1e38) diverges, x 2 seeds) is killed after a few runs and
  resumed: the runs done before are not run again, every cell ends finished or
  marked diverged, the table and results say so;
- every figure hogwild_plot makes from it is a PNG of the expected size (and an
  SVG), and the Fig. 2-style table is there;
- bad options exit 2 with a message.
Exit 77 (skipped) where python3-matplotlib is missing.
"""
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
sweep, plot = os.path.join(build, "src", "hogwild_sweep"), os.path.join(build, "src", "hogwild_plot")
train, data = os.path.join(build, "src", "hogwild_train"), os.path.join(build, "src", "hogwild_data")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIPPED: python3-matplotlib is not installed (scripts/install-deps.sh)")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="hogwild-study-")
try:
    # One hidden model: 3,000 rows to train on, the next 500 to test on.
    subprocess.run([data, "generate", "--rows", "3500", "--features", "300", "--nnz-per-row", "10",
                    "--seed", "5", "--out", f"{tmp}/all.svm"], check=True, stdout=subprocess.DEVNULL)
    with open(f"{tmp}/all.svm") as f:
        lines = f.readlines()
    with open(f"{tmp}/train.svm", "w") as f:
        f.writelines(lines[:3000])
    with open(f"{tmp}/test.svm", "w") as f:
        f.writelines(lines[3000:])
    out = f"{tmp}/study"
    cmd = [sweep, "--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm", "--model", "logistic",
           "--workers", "1,2", "--mode", "serial,hogwild,atomic,lock,simulated,simulated-lock,simulated-striped-1",
           "--lr", "0.5,1e38",
           "--seeds", "2", "--epochs", "4", "--ref-lr", "0.5", "--eps", "0.2", "--telemetry", "--conflicts",
           "--out", out, "--hogwild-train", train]
    cells = 2 * (1 + 6 * 2) * 2  # lr x (serial + 6 modes x 2 workers) x seeds

    # Killed after a few runs, then resumed.
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = os.path.join(out, "runs")
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        done = [d for d in os.listdir(runs)] if os.path.isdir(runs) else []
        done = [d for d in done if os.path.exists(os.path.join(runs, d, "summary.json"))]
        if len(done) >= 3:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    finished_before = [d for d in os.listdir(runs)
                       if os.path.exists(os.path.join(runs, d, "summary.json"))]
    check(len(finished_before) >= 3, f"the killed sweep finished {len(finished_before)} runs first")
    stamps = {d: os.path.getmtime(os.path.join(runs, d, "summary.json")) for d in finished_before}
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-3000:])
    check(r.returncode == 0, "the resumed sweep exits 0")
    first = r.stdout.splitlines()[0] if r.stdout else ""
    check(f"hogwild_sweep: {cells} runs" in first, f"it counts {cells} runs: {first}")
    check(all(os.path.getmtime(os.path.join(runs, d, "summary.json")) == t for d, t in stamps.items()),
          "the runs finished before were not run again")
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    rows = res["rows"]
    check(len(rows) == cells // 2, f"{len(rows)} rows, one per configuration")
    big = [x for x in rows if x["lr"] == 1e38]
    small = [x for x in rows if x["lr"] == 0.5]
    check(all(x["diverged"] == 2 and x["finished"] == 0 for x in big),
          "lr 1e38 diverged in every run, marked")
    check(all(x["finished"] == 2 and x["diverged"] == 0 for x in small), "lr 0.5 finished every run")
    check(all(x["time_to_target"] is not None for x in small), "every lr 0.5 row reached the target")
    check(all(s["largest_stable_lr"] == 0.5 for s in res["stable"]), "the largest stable step is 0.5")
    ser = [x for x in small if x["mode"] == "serial"][0]
    check(ser["statistical_efficiency"] == 1.0 and ser["hardware_efficiency"] == 1.0,
          "serial's efficiencies are 1")
    check(res["references"]["logistic"]["f_star"] < res["references"]["logistic"]["f0"], "f* < f0")
    hog = [x for x in small if x["mode"] == "hogwild" and x["workers"] == 2][0]
    check(hog["staleness_lag_p99"] is not None, "the telemetry's lag is in the results")
    check(hog["lost_mass_mean"] is not None, "the conflicts' lost mass is in the results")
    # Simulated runs: their own exact staleness (no --telemetry passed), their speed on
    # the simulated clock, measured against one simulated worker (serial's weights).
    sim1 = [x for x in small if x["mode"] == "simulated" and x["workers"] == 1][0]
    sim2 = [x for x in small if x["mode"] == "simulated" and x["workers"] == 2][0]
    check(sim1["updates_to_target"] == ser["updates_to_target"],
          "one simulated worker reaches the target after serial's updates")
    check(sim1["statistical_efficiency"] == 1.0 and sim1["hardware_efficiency"] == 1.0,
          "one simulated worker's efficiencies are 1")
    check(sim2["staleness_lag_p99"] is not None and sim2["lost_mass_mean"] is not None,
          "a simulated run's exact staleness and lost mass are in the results")
    sim_runs = [json.load(open(os.path.join(runs, d, "summary.json"))) for d in os.listdir(runs)
                if "-simulated-w2-lr0.5-" in d and os.path.exists(os.path.join(runs, d, "summary.json"))]
    check(len(sim_runs) == 2 and sim2["throughput"] == statistics.median(
        s["simulation"]["examples_per_second"] for s in sim_runs),
          "a simulated row's throughput is the simulated clock's")
    # A simulated access as a mode of its own: its runs got --simulate-access lock
    # (one update at a time: nothing lost, no lag), measured against its own K = 1.
    lock1 = [x for x in small if x["mode"] == "simulated-lock" and x["workers"] == 1][0]
    lock2 = [x for x in small if x["mode"] == "simulated-lock" and x["workers"] == 2][0]
    check(lock1["updates_to_target"] == ser["updates_to_target"] and
          lock1["statistical_efficiency"] == 1.0, "one simulated worker under lock is serial")
    check(lock2["lost_mass_mean"] == 0 and lock2["staleness_lag_p99"] == 0,
          "simulated lock loses nothing and has no lag")
    lock_runs = [json.load(open(os.path.join(runs, d, "summary.json"))) for d in os.listdir(runs)
                 if "-simulated-lock-w2-lr0.5-" in d]
    check(len(lock_runs) == 2 and all(x["simulation"]["access"] == "lock" for x in lock_runs),
          "the simulated-lock runs were run with --simulate-access lock")
    # "simulated-striped-N": striped's locks with N stripes; one stripe is lock.
    striped2 = [x for x in small if x["mode"] == "simulated-striped-1" and x["workers"] == 2][0]
    check(striped2["lost_mass_mean"] == 0 and striped2["staleness_lag_p99"] == 0,
          "simulated striped with one stripe loses nothing and has no lag, as lock")
    striped_runs = [json.load(open(os.path.join(runs, d, "summary.json"))) for d in os.listdir(runs)
                    if "-simulated-striped-1-w2-lr0.5-" in d]
    check(len(striped_runs) == 2 and
          all(x["simulation"]["access"] == "striped" and x["mode_options"] == {"stripes": 1}
              for x in striped_runs),
          "the simulated-striped-1 runs were run with --simulate-access striped --stripes 1")
    with open(os.path.join(out, "table.md")) as f:
        table = f.read()
    check("| logistic | hogwild | 2 | 0.5 |" in table and "| logistic | serial | 1 | 1e+38 |" in table,
          "table.md lists the configurations")

    # The figures.
    r = subprocess.run([plot, out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 0, "hogwild_plot exits 0" + ("" if r.returncode == 0 else ": " + r.stdout))
    expected = {  # name: (least width, least height) in pixels
        "speedup-logistic": (900, 350), "suboptimality-logistic": (1200, 600),
        "efficiency-logistic": (1100, 350), "staleness": (550, 350),
        "lost-mass-logistic": (1000, 350), "stability-logistic": (1200, 300)}
    for name, (w, h) in expected.items():
        path = os.path.join(out, "plots", name + ".png")
        ok = os.path.exists(path) and os.path.getsize(path) > 5000
        size = (0, 0)
        if ok:
            with open(path, "rb") as f:
                head = f.read(24)
            ok = head[:8] == b"\x89PNG\r\n\x1a\n"
            size = struct.unpack(">II", head[16:24])
        check(ok and size[0] >= w and size[1] >= h and size[0] < 5000 and size[1] < 3000,
              f"{name}.png is a PNG of {size[0]}x{size[1]} (at least {w}x{h})")
        check(os.path.exists(os.path.join(out, "plots", name + ".svg")), f"{name}.svg")
    # Every figure names the machine its runs ran on, and the simulated runs' cost model.
    machine = json.load(open(os.path.join(runs, sorted(stamps)[0], "summary.json"))).get("machine", "")
    check(re.search(r"\(.+\), \d+ cores?$", machine) is not None, f"a summary names its machine: {machine!r}")
    for name in expected:
        with open(os.path.join(out, "plots", name + ".svg")) as f:
            words = " ".join(re.sub(r"<[^>]+>", " ", f.read()).split())  # (the caption may wrap)
        check(f"ran on {machine}; simulated runs on the cost model built-in" in words,
              f"{name}.svg names the machine and the cost model")
    with open(os.path.join(out, "plots", "table.md")) as f:
        fig2 = f.read()
    check("| logistic | lock | 2 |" in fig2, "the Fig. 2-style table")

    # A run folder alone: its curve.
    run_dir = os.path.join(runs, sorted(stamps)[0])
    r = subprocess.run([plot, run_dir, "--out", f"{tmp}/one"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 0 and os.path.getsize(f"{tmp}/one/run.png") > 5000, "a run folder's curve")

    # Bad options.
    for args, says in ((["--workers", "0"], "--workers values must be positive"),
                       (["--lr", "x"], "--lr expects a comma-separated list"),
                       (["--eps", "2"], "--eps must be between 0 and 1")):
        r = subprocess.run(cmd[:1] + ["--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm",
                                      "--out", f"{tmp}/bad", "--hogwild-train", train] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check(r.returncode == 2 and says in r.stdout, f"{' '.join(args)}: exit 2, '{says}'")
    r = subprocess.run([sweep, "--train", f"{tmp}/nothing.svm", "--test", f"{tmp}/test.svm", "--out",
                        f"{tmp}/bad", "--hogwild-train", train], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 2 and "no such file" in r.stdout, "a missing data file: exit 2")
    # A cost model for the simulated runs alone: the serial reference and a real run
    # beside them take none.
    with open(f"{tmp}/costs.json", "w") as f:
        json.dump({"example_ns": 50, "idle_ns": 100, "read_ns": 3, "write_ns": 3, "coherence_ns": 20,
                   "recent_writes": 64}, f)
    costed = f"{tmp}/costed"

    def costed_sweep(costs, epochs):  # a real and a simulated mode into the same folder
        return subprocess.run(cmd[:1] + ["--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm",
                                         "--out", costed, "--hogwild-train", train, "--mode",
                                         "hogwild,simulated", "--workers", "2", "--seeds", "1",
                                         "--epochs", str(epochs), "--cost-model", costs],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    r = costed_sweep(f"{tmp}/costs.json", 1)
    check(r.returncode == 0, "a sweep with --cost-model exits 0" + ("" if r.returncode == 0 else ": " + r.stdout))
    sims = [json.load(open(os.path.join(costed, "runs", d, "summary.json")))
            for d in os.listdir(os.path.join(costed, "runs")) if "-simulated-" in d] \
        if os.path.isdir(os.path.join(costed, "runs")) else []
    check(len(sims) == 1 and sims[0]["simulation"]["cost_model"]["source"] == f"{tmp}/costs.json"
          and sims[0]["simulation"]["cost_model"]["coherence_ns"] == 20,
          "the simulated run ran with the sweep's --cost-model")
    # Resumed in the same folder on other costs: refused, its runs would be taken for these.
    with open(f"{tmp}/costs2.json", "w") as f:
        json.dump({"coherence_ns": 99}, f)
    r = costed_sweep(f"{tmp}/costs2.json", 1)
    check(r.returncode == 2 and "holds a sweep whose simulated runs had the cost model" in r.stdout,
          "a sweep resumed on another cost model: exit 2" + ("" if r.returncode == 2 else ": " + r.stdout))
    r = costed_sweep(f"{tmp}/costs.json", 2)
    check(r.returncode == 2 and "holds a sweep whose runs had --epochs 1, and this one asks for 2" in r.stdout,
          "a sweep resumed with other epochs: exit 2" + ("" if r.returncode == 2 else ": " + r.stdout))
    with open(f"{tmp}/list.json", "w") as f:
        json.dump([1, 2], f)
    for args, says in ((["--cost-model", f"{tmp}/nothing.json"], "no such file"),
                       (["--cost-model", f"{tmp}/list.json"], "a JSON object of costs is wanted"),
                       (["--cost-model", f"{tmp}/costs.json", "--mode", "serial,hogwild"],
                        "--cost-model is for simulated runs, and --mode serial,hogwild has none"),
                       (["--train-option", "cost-model=x.json"], "use --cost-model FILE")):
        r = subprocess.run(cmd[:1] + ["--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm",
                                      "--out", f"{tmp}/bad", "--hogwild-train", train] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check(r.returncode == 2 and says in r.stdout, f"{' '.join(args)}: exit 2, '{says}'")
    # Options that hogwild_train refuses: the sweep stops at the first such run, with its message.
    for args, says in ((["--mode", "hogwild,striped-0", "--workers", "2"],
                        "hogwild_sweep: error: hogwild_train refused logistic-striped-0-w2-lr0.5-s1: "
                        "hogwild_train: error: --stripes 0 is out of range"),
                       (["--model", "svm"], "the reference run for svm failed (exit 2): "
                                            "hogwild_train: error: unknown model \"svm\"")):
        r = subprocess.run(cmd[:1] + ["--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm",
                                      "--out", f"{tmp}/refused", "--hogwild-train", train,
                                      "--seeds", "1", "--epochs", "1"] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ok = r.returncode == 2 and says in r.stdout
        check(ok, f"{' '.join(args)}: exit 2, '{says}'" + ("" if ok else f": {r.stdout}"))
        check(r.stdout.count("failed (exit 2") <= 1, "it stops at the first refused run")
    # A mode that is none: refused before the reference runs, nothing written.
    r = subprocess.run(cmd[:1] + ["--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm",
                                  "--out", f"{tmp}/unknown", "--hogwild-train", train,
                                  "--mode", "hogwild,simulated-bogus"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 2 and "--mode simulated-bogus: not a mode" in r.stdout
          and not os.path.exists(f"{tmp}/unknown"), "an unknown sweep mode: exit 2 before anything runs")
    r = subprocess.run([plot, f"{tmp}/nowhere"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(r.returncode == 2 and "no such folder" in r.stdout, "hogwild_plot on no folder: exit 2")
    # An output folder that is a file: one line, exit 2, no traceback.
    for cmd_, says in (([sweep, "--train", f"{tmp}/train.svm", "--test", f"{tmp}/test.svm", "--out",
                         f"{tmp}/train.svm", "--hogwild-train", train],
                        f"hogwild_sweep: error: --out {tmp}/train.svm: not a folder"),
                       ([plot, out, "--out", f"{tmp}/train.svm"],
                        f"hogwild_plot: error: --out {tmp}/train.svm: not a folder")):
        r = subprocess.run(cmd_, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ok = r.returncode == 2 and says in r.stdout and "Traceback" not in r.stdout
        check(ok, f"{os.path.basename(cmd_[0])} --out a file: exit 2, '{says}'" + ("" if ok else ": " + r.stdout))
    # A damaged folder (a run killed while writing its metrics, a file edited by
    # hand): exit 2 naming the file and line, no traceback, for the plot and for the
    # sweep resumed over it.
    damaged = f"{tmp}/damaged"
    shutil.copytree(out, damaged)
    victim = os.path.join(damaged, "runs", sorted(stamps)[0], "metrics.jsonl")
    with open(victim, "a") as f:
        f.write('{"epoch": 3, "time')
    lines = sum(1 for _ in open(victim))
    for cmd_ in ([plot, damaged, "--out", f"{tmp}/damaged-plots"], cmd + ["--out", damaged]):
        r = subprocess.run(cmd_, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        says = f"{victim}:{lines}: not JSON"
        ok = r.returncode == 2 and says in r.stdout and "Traceback" not in r.stdout
        check(ok, f"{os.path.basename(cmd_[0])} on a cut metrics line: exit 2, '{says}'" +
              ("" if ok else ": " + r.stdout))
    with open(os.path.join(damaged, "results.json"), "w") as f:
        f.write("{bad")
    r = subprocess.run([plot, damaged], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = r.returncode == 2 and f"{damaged}/results.json:1: not JSON" in r.stdout and "Traceback" not in r.stdout
    check(ok, "hogwild_plot on a damaged results.json: exit 2" + ("" if ok else ": " + r.stdout))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
