#!/usr/bin/python3
"""hogwild_sweep: a convergence study as one command (docs/EXPERIMENTS.md).

  hogwild_sweep --train rcv1.svm --test rcv1.t.svm --model logistic \\
                --workers 1,2,4 --mode serial,hogwild,atomic,lock --lr 0.1,0.3,1 --seeds 3 --out study/

Runs hogwild_train over the grid model x workers x mode x step size x seed, each
cell once per seed, the cells of one seed round in an order of their own
(interleaved: a slow phase of the machine hits every configuration alike). A cell
whose summary is in OUT/runs/ is not run again, so an interrupted sweep resumes
where it stopped. Every run keeps its summary, metrics and output there.

Then, from a long serial run per model (cached in OUT/reference/) giving the
reference optimum f*, and a run with a vanishing step giving the starting loss f0:
a table of medians over the seeds with their spread (OUT/table.md,
OUT/results.json): throughput, final test loss, time and updates to the target
loss f* + eps (f0 - f*), statistical efficiency (serial's updates to the target
over these), hardware efficiency (throughput over the same mode's with one
worker) and their product, and the largest step size that did not diverge per
mode and worker count. A run that diverges is marked, not fatal.

Simulated runs (--mode simulated, docs/EXPERIMENTS.md) take part as any mode, and
a mode "simulated-ACCESS" is one with --simulate-access ACCESS (hogwild, atomic,
lock, striped; "simulated-striped-N" and "striped-N" run N stripes, where
--train-option would give --stripes to every run, the serial reference included,
which refuses it), so that one sweep sets the accesses side by side (--mode
simulated,simulated-atomic,simulated-lock); each is measured against one simulated
worker of its own (K = 1: serial's weights, on the simulated clock). --cost-model
FILE gives the simulated runs a cost model (bench/calibrate_simulator.py's output);
the real runs and the serial reference take none, so --train-option cost-model=FILE
is refused. A sweep resumed in an OUT whose runs had another cost model (or the
same file with other contents), other --epochs, --train-option, --telemetry or
--conflicts is refused: their runs would be taken for its own.

A mode "hogwild" is plain Hogwild! (--layout plain: every update to the shared
weights, what the simulator models); "hogwild-auto", "hogwild-replicas" and
"hogwild-hot" run hogwild_train's other layouts (--layout, docs/PERFORMANCE.md).

Exit status: 0 done, 2 bad options (or a file or folder it cannot read or write),
4 a full disk, 1 a run failed for another reason than divergence (its output is in
OUT/runs/<cell>/output.txt).
"""
import argparse
import errno
import hashlib
import fcntl
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time


def die_with_sweep():
    """In a run's process before it starts: it dies with the sweep, SIGKILL included
    (PR_SET_PDEATHSIG), so that a killed sweep leaves no run still writing its cell's
    files; a resumed sweep's run of that cell would be refused, since hogwild_train
    claims its outputs while it writes them."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass

HERE = os.path.dirname(os.path.abspath(__file__))
# The study tools' shared file handling: beside this script in the build tree,
# installed under share/hogwild.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "share", "hogwild")]
from hogwild_study_files import fail, load_json, load_jsonl, checked, write_atomic, file_digest  # noqa: E402


def find_train(given):
    if given:
        return given
    for c in (os.path.join(HERE, "hogwild_train"), shutil.which("hogwild_train")):
        if c and os.path.exists(c):
            return c
    fail("cannot find hogwild_train: give --hogwild-train PATH")


def parse_list(text, kind, name):
    out = []
    for item in text.split(","):
        try:
            v = kind(item)
        except ValueError:
            fail(f"--{name} expects a comma-separated list, got '{text}'")
        if kind is float and not (math.isfinite(v) and v <= 3.4028234663852886e38):
            fail(f"--{name} {item}: not a number of a float's range")
        if kind is not str and v <= 0:
            fail(f"--{name} values must be positive, got '{item}'")
        out.append(v)
    if not out or len(set(out)) != len(out):
        fail(f"--{name} expects distinct values, got '{text}'")
    return out


LAYOUTS = ("plain", "auto", "replicas", "hot")
# hogwild_train's --mode and --simulate-access choices (its error for another one
# lists them), checked before the reference runs: a sweep mode that is none of them
# would stop the sweep at its first run, leaving a reference and folders behind.
MODES = ("serial", "hogwild", "atomic", "lock", "ddp", "dp", "ps", "striped", "simulated")
ACCESSES = ("hogwild", "atomic", "lock", "striped")
MODE_FORMS = ("MODE (" + ", ".join(MODES) + "), hogwild-LAYOUT (" + ", ".join(LAYOUTS) +
              "), striped-N, simulated-ACCESS (" + ", ".join(ACCESSES) + ") or simulated-striped-N")


def known_mode(label):
    """Whether `label` is a sweep mode: one of MODES, or a form of MODE_FORMS."""
    if label in MODES or stripes_of(label) is not None or layout_of(label) is not None:
        return True
    head, _, access = label.partition("-")
    return head == "simulated" and access in ACCESSES


def run_mode(label):
    """A sweep mode's hogwild_train --mode ("striped-N": striped, "hogwild-LAYOUT":
    hogwild), and --simulate-access (or None)."""
    if label.startswith("simulated-"):
        return "simulated", label[len("simulated-"):].split("-")[0]
    if stripes_of(label) is not None:  # striped-N
        return "striped", None
    if layout_of(label) is not None:
        return "hogwild", None
    return label, None


def layout_of(label):
    """The --layout of a sweep mode: "hogwild" is plain Hogwild! (the algorithm the
    simulator and the papers study), "hogwild-LAYOUT" any other; else None."""
    if label == "hogwild":
        return "plain"
    head, _, tail = label.partition("-")
    return tail if head == "hogwild" and tail in LAYOUTS else None


def own_options(extra, label):
    """The --train-option values for a run of sweep mode `label` (None: the serial
    reference): --hot-flush only where a hot window can be (hogwild-hot,
    hogwild-auto, or any run given --hot-k), since hogwild_train refuses it
    elsewhere."""
    if "hot-flush" in extra and "hot-k" not in extra and label not in ("hogwild-hot", "hogwild-auto"):
        return {k: v for k, v in extra.items() if k != "hot-flush"}
    return dict(extra)


def stripes_of(label):
    """The --stripes of a sweep mode "simulated-striped-N" or "striped-N" (else None)."""
    head, _, n = label.rpartition("-")
    if head in ("simulated-striped", "striped") and n.isdigit():
        return int(n)
    return None


def cell_id(c):
    return f"{c['model']}-{c['mode']}-w{c['workers']}-lr{c['lr']:g}-s{c['seed']}"


def run_train(args, opts, folder):
    """One hogwild_train run into `folder`; returns its record (never raises on a
    failed run)."""
    os.makedirs(folder, exist_ok=True)
    summary = os.path.join(folder, "summary.json")
    metrics = os.path.join(folder, "metrics.jsonl")
    cmd = [args.hogwild_train, "--train", args.train, "--quiet", "--summary", summary + ".part",
           "--metrics", metrics, "--output-wait", "60"]
    if args.test:
        cmd += ["--test", args.test]
    for k, v in opts.items():
        if v is True:
            cmd.append("--" + k)
        elif v is not None and v is not False:
            cmd += ["--" + k, str(v)]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       preexec_fn=die_with_sweep)
    with open(os.path.join(folder, "output.txt"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout)
    record = {"exit": p.returncode, "seconds": time.time() - t0}
    if p.returncode == 0:
        os.replace(summary + ".part", summary)  # the mark of a finished cell
    else:
        diverged = "diverged" in p.stdout
        record["diverged"] = diverged
        record["message"] = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        with open(os.path.join(folder, "failed.json"), "w") as f:
            json.dump(record, f)
    return record


def read_run(folder):
    r = load_json(os.path.join(folder, "summary.json"), need=("samples_per_second", "test_loss"))
    records = []  # the evaluations at epoch ends that have a test loss
    metrics = os.path.join(folder, "metrics.jsonl")
    for m in load_jsonl(metrics):
        if m.get("end_of_epoch") and m.get("test_loss") is not None:
            records.append(checked(m, ("time", "samples"), metrics))
    curve = [(m["time"], m["samples"], m["test_loss"]) for m in records]
    # --mode simulated: its speed and its curve's times are the simulated clock's, not
    # the wall's: each point's time is the clock's when its weights were captured (a
    # run recorded before the records carried it: its examples at the mean pace).
    sim = r.get("simulation")
    if sim and sim.get("examples_per_second"):
        rate = sim["examples_per_second"]
        r["samples_per_second"] = rate
        clocked = all("simulated_time" in m for m in records)
        curve = [(m["simulated_time"] if clocked else m["samples"] / rate, m["samples"], m["test_loss"])
                 for m in records]
    r["curve"] = curve
    return r


def reference(args, model):
    """f* (a long serial run's best test loss) and f0 (the starting weights' test
    loss: one epoch with a vanishing step), cached per data and model."""
    key = hashlib.sha1(json.dumps([os.path.abspath(args.train), args.train_sha256,
                                   os.path.abspath(args.test), args.test_sha256, model, args.ref_epochs,
                                   args.ref_lr, args.extra]).encode()).hexdigest()[:12]
    folder = os.path.join(args.out, "reference", f"{model}-{key}")
    cached = os.path.join(folder, "reference.json")
    if os.path.exists(cached):
        return load_json(cached, need=("f_star", "f0"))
    print(f"reference for {model}: serial, {args.ref_epochs} epochs at lr {args.ref_lr:g} ...",
          flush=True)
    base = dict(own_options(args.extra_opts, None), model=model, mode="serial", seed=1)
    long = run_train(args, dict(base, epochs=args.ref_epochs, lr=args.ref_lr),
                     os.path.join(folder, "long"))
    start = run_train(args, dict(base, epochs=1, lr="1e-30"), os.path.join(folder, "start"))
    for rec, name in ((long, "long"), (start, "start")):
        if rec["exit"]:
            fail(f"the reference run for {model} failed (exit {rec['exit']}): {rec['message']} "
                 f"(see {os.path.join(folder, name, 'output.txt')})")
    lr_ = read_run(os.path.join(folder, "long"))
    st = read_run(os.path.join(folder, "start"))
    ref = {"f_star": min(loss for _, _, loss in lr_["curve"]), "f0": st["curve"][0][2],
           "epochs": args.ref_epochs, "lr": args.ref_lr}
    write_atomic(cached, json.dumps(ref))
    return ref


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def to_target(curve, target):
    """(seconds, examples) when the test loss first reached the target, or None."""
    for t, samples, loss in curve:
        if loss <= target:
            return t, samples
    return None


def analyse(args, cells, refs):
    groups = {}
    for c in cells:
        groups.setdefault((c["model"], c["mode"], c["workers"], c["lr"]), []).append(c)
    rows = []
    for (model, mode, workers, lr), cs in sorted(groups.items()):
        ref = refs[model]
        target = ref["f_star"] + args.eps * (ref["f0"] - ref["f_star"])
        runs, diverged, failed = [], 0, 0
        for c in cs:
            folder = os.path.join(args.out, "runs", cell_id(c))
            if os.path.exists(os.path.join(folder, "summary.json")):
                runs.append(read_run(folder))
            elif os.path.exists(os.path.join(folder, "failed.json")):
                if load_json(os.path.join(folder, "failed.json")).get("diverged"):
                    diverged += 1
                else:
                    failed += 1
        reach = [to_target(r["curve"], target) for r in runs]
        row = {"model": model, "mode": mode, "workers": workers, "lr": lr, "seeds": len(cs),
               "finished": len(runs), "diverged": diverged, "failed": failed,
               "target": target, "f_star": ref["f_star"], "f0": ref["f0"],
               "throughput": median([r["samples_per_second"] for r in runs]),
               "throughput_band": spread([r["samples_per_second"] for r in runs]),
               "final_loss": median([r["test_loss"] for r in runs]),
               "final_loss_band": spread([r["test_loss"] for r in runs]),
               "final_accuracy": median([r.get("test_accuracy") for r in runs]),
               "reached": sum(1 for x in reach if x),
               "time_to_target": median([x[0] for x in reach if x]),
               "time_to_target_band": spread([x[0] for x in reach if x]),
               "updates_to_target": median([x[1] for x in reach if x]),
               "staleness_lag_p99": median([(r.get("staleness") or {}).get("lag", {}).get("p99")
                                            for r in runs]),
               "lost_mass_mean": median([(r.get("conflicts") or {}).get("lost_mass_mean")
                                         for r in runs])}
        rows.append(row)
    by = {(r["model"], r["mode"], r["workers"], r["lr"]): r for r in rows}
    for r in rows:
        # Simulated runs are measured against one simulated worker (serial's weights,
        # on the simulated clock), real ones against serial.
        simulated = run_mode(r["mode"])[0] == "simulated"
        serial = (simulated and (by.get((r["model"], r["mode"], 1, r["lr"])) or
                                 by.get((r["model"], "simulated", 1, r["lr"])))) or \
            by.get((r["model"], "serial", 1, r["lr"]))
        one = by.get((r["model"], r["mode"], 1, r["lr"])) or serial
        se = (serial["updates_to_target"] / r["updates_to_target"]
              if serial and serial["updates_to_target"] and r["updates_to_target"] else None)
        he = (r["throughput"] / one["throughput"]
              if one and one["throughput"] and r["throughput"] else None)
        r["statistical_efficiency"] = se
        r["hardware_efficiency"] = he
        r["speedup"] = se * he if se is not None and he is not None else None
        r["time_speedup"] = (serial["time_to_target"] / r["time_to_target"]
                             if serial and serial["time_to_target"] and r["time_to_target"] else None)
    stable = {}
    for r in rows:
        k = (r["model"], r["mode"], r["workers"])
        ok = r["finished"] == r["seeds"] and r["diverged"] == 0
        stable.setdefault(k, None)
        if ok and (stable[k] is None or r["lr"] > stable[k]):
            stable[k] = r["lr"]
    return rows, [{"model": m, "mode": mo, "workers": w, "largest_stable_lr": lr}
                  for (m, mo, w), lr in sorted(stable.items())]


def fmt(x, spec=".3g"):
    return "—" if x is None else format(x, spec)


def band(b, spec=".3g"):
    return "" if b[0] is None else f" [{format(b[0], spec)}, {format(b[1], spec)}]"


def write_table(args, rows, stable, refs):
    lines = [f"# Sweep: {args.train}\n",
             f"Medians over {args.seeds} seed(s), [min, max] over the seeds. Target loss: "
             f"f* + {args.eps:g} (f0 - f*), f* from a serial run of {args.ref_epochs} epochs.\n"]
    for m, ref in refs.items():
        lines.append(f"- {m}: f* = {ref['f_star']:.5g}, f0 = {ref['f0']:.5g}")
    lines.append("")
    lines.append("| model | mode | workers | lr | examples/s | final test loss | accuracy | "
                 "time to target (s) | reached | stat. eff. | hw eff. | speedup | lag p99 | "
                 "lost mass | diverged |")
    lines.append("|" + "---|" * 15)
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['mode']} | {r['workers']} | {r['lr']:g} | "
            f"{fmt(r['throughput'], '.0f')}{band(r['throughput_band'], '.0f')} | "
            f"{fmt(r['final_loss'], '.4f')}{band(r['final_loss_band'], '.4f')} | "
            f"{fmt(r['final_accuracy'], '.4f')} | "
            f"{fmt(r['time_to_target'], '.3f')}{band(r['time_to_target_band'], '.3f')} | "
            f"{r['reached']}/{r['finished']} | {fmt(r['statistical_efficiency'], '.2f')} | "
            f"{fmt(r['hardware_efficiency'], '.2f')} | {fmt(r['speedup'], '.2f')} | "
            f"{fmt(r['staleness_lag_p99'], '.0f')} | {fmt(r['lost_mass_mean'], '.2g')} | "
            f"{r['diverged'] or ''}{' (failed ' + str(r['failed']) + ')' if r['failed'] else ''} |")
    lines.append("\nLargest step size that finished every seed without diverging:\n")
    lines.append("| model | mode | workers | largest stable lr |\n|---|---|---|---|")
    for s in stable:
        lines.append(f"| {s['model']} | {s['mode']} | {s['workers']} | "
                     f"{fmt(s['largest_stable_lr'], 'g') if s['largest_stable_lr'] else 'none'} |")
    text = "\n".join(lines) + "\n"
    write_atomic(os.path.join(args.out, "table.md"), text)
    return text


def main():
    p = argparse.ArgumentParser(prog="hogwild_sweep", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True, help="the test set the losses are measured on")
    p.add_argument("--model", default="logistic", help="comma-separated models")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--mode", default="serial,hogwild,atomic,lock",
                   help="comma-separated: " + MODE_FORMS)
    p.add_argument("--lr", default="0.5")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--eps", type=float, default=0.05,
                   help="target loss f* + eps (f0 - f*) (default 0.05)")
    p.add_argument("--ref-epochs", type=int, default=0, help="default: 4 x --epochs")
    p.add_argument("--ref-lr", type=float, default=0, help="default: the smallest --lr")
    p.add_argument("--telemetry", action="store_true",
                   help="pass --telemetry to the runs (a simulated run's staleness is exact without it)")
    p.add_argument("--conflicts", action="store_true",
                   help="pass --conflicts to the runs of modes hogwild, atomic, lock and serial")
    p.add_argument("--train-option", action="append", default=[], metavar="OPTION=VALUE",
                   help="another hogwild_train option for every run (--train-option lr-decay=0.9)")
    p.add_argument("--cost-model", default="", metavar="FILE",
                   help="a cost-model file for the simulated runs (docs/EXPERIMENTS.md)")
    p.add_argument("--out", required=True)
    p.add_argument("--hogwild-train", default="", help="default: next to this script, or on PATH")
    p.add_argument("--shuffle-seed", type=int, default=1)
    args = p.parse_args()
    args.hogwild_train = find_train(args.hogwild_train)
    if not args.out:
        fail("--out '': give the folder the sweep writes")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out}: not a folder")
    for f in (args.train, args.test) + ((args.cost_model,) if args.cost_model else ()):
        if not os.path.exists(f):
            fail(f"no such file: {f}")
    for f, flag in ((args.train, "--train"), (args.test, "--test")):
        if not os.path.isfile(f):  # a pipe, <(...): read once, by the first run alone
            fail(f"{flag} {f}: not a regular file (every run of the sweep reads it again)")
    args.cost_model = os.path.abspath(args.cost_model) if args.cost_model else ""
    args.cost_model_sha256 = ""
    if args.cost_model:  # checked before any run: a bad one would stop the sweep at its first simulated run
        if not os.path.isfile(args.cost_model):
            fail(f"--cost-model {args.cost_model}: not a regular file")
        with open(args.cost_model, "rb") as f:
            raw = f.read()
        try:
            costs = json.loads(raw)
        except ValueError as e:
            fail(f"--cost-model {args.cost_model}: not JSON: {e}")
        if not isinstance(costs, dict):
            fail(f"--cost-model {args.cost_model}: a JSON object of costs is wanted")
        args.cost_model_sha256 = hashlib.sha256(raw).hexdigest()
    models = parse_list(args.model, str, "model")
    workers = parse_list(args.workers, int, "workers")
    modes = parse_list(args.mode, str, "mode")
    for m in modes:
        if not known_mode(m):
            fail(f"--mode {m}: not a mode; give {MODE_FORMS}")
    lrs = parse_list(args.lr, float, "lr")
    named = {}  # the runs' folders name a step size with 6 significant digits
    for lr in lrs:
        if f"{lr:g}" in named:
            fail(f"--lr {named[f'{lr:g}']!r} and {lr!r} are the same to 6 significant digits, "
                 "which name the runs' folders: give step sizes that differ there")
        named[f"{lr:g}"] = lr
    if args.ref_lr and not (math.isfinite(args.ref_lr) and 0 < args.ref_lr <= 3.4028234663852886e38):
        fail(f"--ref-lr {args.ref_lr}: not a positive number of a float's range")
    if args.seeds < 1 or args.epochs < 1:
        fail("--seeds and --epochs must be at least 1")
    if not 0 < args.eps < 1:
        fail(f"--eps must be between 0 and 1, got {args.eps}")
    args.ref_epochs = args.ref_epochs or 4 * args.epochs
    args.ref_lr = args.ref_lr or min(lrs)
    args.extra_opts = {}
    for o in args.train_option:
        k, sep, v = o.partition("=")
        if not sep or not k:
            fail(f"--train-option expects OPTION=VALUE, got '{o}'")
        args.extra_opts[k.lstrip("-")] = v
    if args.cost_model and not any(run_mode(m)[0] == "simulated" for m in modes):
        fail(f"--cost-model is for simulated runs, and --mode {args.mode} has none "
             "(simulated, simulated-ACCESS)")
    # The grid's own options: a --train-option of one was overwritten by the grid.
    for k, flag in (("model", "--model"), ("mode", "--mode"), ("workers", "--workers"), ("lr", "--lr"),
                    ("seed", "--seeds"), ("epochs", "--epochs"), ("train", "--train"),
                    ("test", "--test"), ("summary", "--out"), ("metrics", "--out")):
        if k in args.extra_opts:
            fail(f"--train-option {k}=...: the sweep sets --{k} itself; use the sweep's {flag}")
    if "cost-model" in args.extra_opts:
        fail("--train-option cost-model=FILE would give it to the real runs and the serial "
             "reference, which refuse it: use --cost-model FILE (the simulated runs only)")
    args.extra = sorted(args.extra_opts.items())
    # One sweep a folder: a second one would run every cell again beside the first,
    # each measuring under the other's load, and one results.json would win.
    os.makedirs(args.out, exist_ok=True)
    lock = open(os.path.join(args.out, ".lock"), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        fail(f"another hogwild_sweep (pid {lock.read().strip() or '?'}) writes {args.out} now: "
             "wait for it, or give another --out")
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    args.lock = lock  # held until the sweep exits
    args.train_sha256, args.test_sha256 = file_digest(args.train), file_digest(args.test)
    # A resumed sweep takes the runs it finds as its own: those of simulated runs on
    # another cost model (or the file changed since) would be taken for this one's.
    spec_file = os.path.join(args.out, "sweep.json")
    if os.path.exists(spec_file):
        before = load_json(spec_file, need=("epochs", "seeds"))
    elif os.path.isdir(os.path.join(args.out, "runs")):
        fail(f"{args.out} holds runs but no sweep.json: what they were run with is unknown, so "
             "they cannot be taken for this sweep's; give another --out")
    else:
        before = {}
    # Runs on other data: the same names, other files, or the files changed since.
    for key, flag in (("train_sha256", "--train"), ("test_sha256", "--test")):
        if key in before and before[key] != getattr(args, key):
            fail(f"{args.out} holds a sweep whose runs had {flag} {before.get(flag[2:])} with SHA-256 "
                 f"{before[key][:16]}..., and this one's {getattr(args, flag[2:])} has "
                 f"{getattr(args, key)[:16]}...: its runs would be taken for these; give another --out")
    if before and before.get("cost_model_sha256", "") != args.cost_model_sha256:
        was = f"the cost model {before['cost_model']}" if before.get("cost_model") else "the built-in cost model"
        now = f"the cost model {args.cost_model}" if args.cost_model else "the built-in cost model"
        fail(f"{args.out} holds a sweep whose simulated runs had {was} (as its file was then), and this "
             f"one asks for {now}: its runs would be taken for these; give another --out")
    # So would runs of other epochs or hogwild_train options. (The grid may grow:
    # more models, modes, workers, step sizes or seeds are cells of their own.)
    for key, flag in (("epochs", "--epochs"), ("train_option", "--train-option"),
                      ("telemetry", "--telemetry"), ("conflicts", "--conflicts")):
        if key in before:
            was, now = before[key], getattr(args, key)
            if key == "train_option":
                was, now = sorted(was), sorted(now)
            if was != now:
                fail(f"{args.out} holds a sweep whose runs had {flag} {was}, and this one asks for "
                     f"{now}: its runs would be taken for these; give another --out")
    spec = {k: v for k, v in vars(args).items() if k not in ("extra_opts", "extra", "lock")}
    write_atomic(spec_file, json.dumps(dict(spec, models=models, workers_list=workers, modes=modes,
                                            lrs=lrs), indent=1))
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)  # (after: runs/ implies sweep.json)

    configs = []
    for model in models:
        for mode in modes:
            for w in ([1] if mode == "serial" else workers):
                for lr in lrs:
                    configs.append({"model": model, "mode": mode, "workers": w, "lr": lr})
    cells = []
    shuffler = random.Random(args.shuffle_seed)
    for seed in range(1, args.seeds + 1):
        order = list(configs)
        shuffler.shuffle(order)
        cells += [dict(c, seed=seed) for c in order]

    refs = {m: reference(args, m) for m in models}
    def finished(c):  # a summary, or a divergence (a result too); other failures run again
        folder = os.path.join(args.out, "runs", cell_id(c))
        if os.path.exists(os.path.join(folder, "summary.json")):
            return True
        if not os.path.exists(os.path.join(folder, "failed.json")):
            return False
        return bool(load_json(os.path.join(folder, "failed.json")).get("diverged"))
    todo = [c for c in cells if not finished(c)]
    print(f"hogwild_sweep: {len(cells)} runs, {len(cells) - len(todo)} done before, "
          f"{len(todo)} to run", flush=True)
    hard_failures = 0
    for i, c in enumerate(todo):
        mode, access = run_mode(c["mode"])
        opts = dict(own_options(args.extra_opts, c["mode"]), model=c["model"], mode=mode,
                    workers=c["workers"], lr=c["lr"], seed=c["seed"], epochs=args.epochs)
        if access:
            opts["simulate-access"] = access
        if args.cost_model and mode == "simulated":
            opts["cost-model"] = args.cost_model
        if stripes_of(c["mode"]) is not None:
            opts["stripes"] = stripes_of(c["mode"])
        if layout_of(c["mode"]) is not None and "layout" not in args.extra_opts:
            opts["layout"] = layout_of(c["mode"])
        if args.telemetry and mode != "simulated":  # it measures every update exactly
            opts["telemetry"] = True
        if args.conflicts and c["mode"] in ("serial", "hogwild", "atomic", "lock"):
            opts["conflicts"] = True
        folder = os.path.join(args.out, "runs", cell_id(c))
        rec = run_train(args, opts, folder)
        state = "ok" if rec["exit"] == 0 else "diverged" if rec.get("diverged") else \
            f"failed (exit {rec['exit']}: {rec['message']})"
        hard_failures += rec["exit"] != 0 and not rec.get("diverged")
        print(f"[{i + 1}/{len(todo)}] {cell_id(c)}: {state} in {rec['seconds']:.1f} s", flush=True)
        if rec["exit"] == 2:  # refused options or data: every seed of it would be refused too
            fail(f"hogwild_train refused {cell_id(c)}: {rec['message']} "
                 f"(see {os.path.join(folder, 'output.txt')})")

    # f*: the best test loss seen, by the reference or by any run of the sweep (a
    # larger step may beat the reference's).
    for m in models:
        for c in cells:
            folder = os.path.join(args.out, "runs", cell_id(c))
            if c["model"] == m and os.path.exists(os.path.join(folder, "summary.json")):
                for _, _, loss in read_run(folder)["curve"]:
                    refs[m]["f_star"] = min(refs[m]["f_star"], loss)
    rows, stable = analyse(args, cells, refs)
    write_atomic(os.path.join(args.out, "results.json"),
                 json.dumps({"references": refs, "rows": rows, "stable": stable, "eps": args.eps}, indent=1))
    print(write_table(args, rows, stable, refs))
    return 1 if hard_failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # hogwild_sweep ... | head: its reader gone, as hogwild_train says it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except OSError as e:  # a file or folder it could not read or write: said, not a traceback
        where = e.filename if e.filename is not None else "?"
        print(f"hogwild_sweep: error: {where}: {e.strerror or e}", file=sys.stderr)
        sys.exit(4 if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else 2)
    except KeyboardInterrupt:
        sys.exit(130)
