#!/usr/bin/python3
"""hogwild_plot: the figures of a study made by hogwild_sweep (docs/EXPERIMENTS.md).

  hogwild_plot study/            # every figure below, as PNG and SVG, in study/plots/
  hogwild_plot run/              # a run directory (summary.json, metrics.jsonl): its curves

From a sweep: speedup against workers per mode with the ideal line; suboptimality
(f - f*)/(f0 - f*) on a log scale against time and against updates, one curve per
worker count with the seeds' band; statistical and hardware efficiency against
workers; staleness CDFs per worker count (runs with --telemetry); lost-update mass
per sampled coordinate (runs with --conflicts); the step-size stability map (final
loss over step size x workers, divergence marked); and the Hogwild! paper's
Fig. 2-style table in markdown (plots/table.md). Each figure takes, per mode and
worker count, the step size that reached the target fastest. Under every figure:
the machine its runs ran on (the summaries' `machine`), and for simulated runs the
cost model their clock ran on.
"""
import argparse
import errno
import math
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
# The study tools' shared file handling: beside this script in the build tree,
# installed under share/hogwild.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "share", "hogwild")]
from hogwild_study_files import fail, load_json, load_jsonl, checked  # noqa: E402

try:
    import matplotlib
except ImportError:
    fail("the figures need matplotlib for this python3 (Debian: apt install python3-matplotlib)")
matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # an SVG's words as text, not outlines
import matplotlib.pyplot as plt  # noqa: E402

MODE_ORDER = ["serial", "hogwild", "atomic", "lock", "ddp", "dp"]


def legend(ax, **kw):
    """A legend where something is labelled (a panel may have no curve)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


FOLDER = ""  # the folder main() reads, for a message about its files
CAPTION = ""  # under every figure: where its runs ran (caption())


def caption(summaries):
    """The machines the runs ran on, and the cost models of the simulated ones."""
    machines = sorted({s["machine"] for s in summaries if s.get("machine")})
    costs = sorted({os.path.basename(src) if os.path.isabs(src) else src
                    for s in summaries
                    for src in [str(((s.get("simulation") or {}).get("cost_model") or {}).get("source") or "")]
                    if src})
    text = "ran on " + ("; ".join(machines) if machines else "a machine its summaries do not name")
    if costs:
        text += "; simulated runs on the cost model " + "; ".join(costs)
    return text


def save(fig, out, name, made):
    if CAPTION:  # wrapped to the figure's width (8 pt: about 6.5 px a character at 110 dpi)
        text = textwrap.fill(CAPTION, max(40, int(fig.get_figwidth() * 110 / 6.5)))
        fig.text(0.5, 0, text, ha="center", va="top", fontsize=8, color="0.3")
    for ext in ("png", "svg"):
        path = os.path.join(out, f"{name}.{ext}")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        made.append(path)
    plt.close(fig)


def read_run(folder, f0=None):
    """A run's summary, and its end-of-epoch (seconds, examples, test loss), from
    (0, 0, f0) when the starting loss is known."""
    r = load_json(os.path.join(folder, "summary.json"), need=("train_seconds", "test_loss"))
    r["curve"] = [] if f0 is None else [(0.0, 0, f0)]
    metrics = os.path.join(folder, "metrics.jsonl")
    for m in load_jsonl(metrics):
        if m.get("end_of_epoch") and m.get("test_loss") is not None:
            checked(m, ("time", "samples"), metrics)
            r["curve"].append((m["time"], m["samples"], m["test_loss"]))
    return r


def cell_id(model, mode, workers, lr, seed):
    return f"{model}-{mode}-w{workers}-lr{lr:g}-s{seed}"


class Study:
    def __init__(self, folder):
        self.folder = folder
        results = os.path.join(folder, "results.json")
        self.results = load_json(results, need=("rows", "references", "eps"))
        self.spec = load_json(os.path.join(folder, "sweep.json"), need=("seeds",))
        self.rows = self.results["rows"]
        if not isinstance(self.rows, list):
            fail(f"{results}: its rows are not a list: not a file hogwild_sweep wrote")
        for i, r in enumerate(self.rows):
            checked(r, ("model", "mode", "workers", "lr", "finished", "time_to_target", "final_loss",
                        "diverged"), f"{results}: row {i + 1}")
        for m in {r["model"] for r in self.rows}:
            checked(self.results["references"], (m,), results)
            checked(self.results["references"][m], ("f_star", "f0"), f"{results}: reference of {m}")
        self.models = sorted({r["model"] for r in self.rows})
        self.modes = [m for m in MODE_ORDER if any(r["mode"] == m for r in self.rows)] + sorted(
            {r["mode"] for r in self.rows} - set(MODE_ORDER))

    def best(self, model, mode, workers):
        """The row of the step size that reached the target fastest (else the
        lowest final loss)."""
        rs = [r for r in self.rows if (r["model"], r["mode"], r["workers"]) == (model, mode, workers)
              and r["finished"] > 0]
        if not rs:
            return None
        reached = [r for r in rs if r["time_to_target"] is not None]
        if reached:
            return min(reached, key=lambda r: r["time_to_target"])
        return min(rs, key=lambda r: r["final_loss"] if r["final_loss"] is not None else math.inf)

    def workers_of(self, model, mode):
        return sorted({r["workers"] for r in self.rows if (r["model"], r["mode"]) == (model, mode)})

    def folders(self, row):
        """The folders of a row's runs that finished (a run that diverged has no
        summary)."""
        for seed in range(1, self.spec["seeds"] + 1):
            folder = os.path.join(self.folder, "runs", cell_id(row["model"], row["mode"],
                                                              row["workers"], row["lr"], seed))
            if os.path.exists(os.path.join(folder, "summary.json")):
                yield folder

    def summaries(self):
        """The summaries of the runs the results hold (not one an earlier sweep left
        in the folder)."""
        out = []
        for row in self.rows:
            for folder in self.folders(row):
                out.append(load_json(os.path.join(folder, "summary.json")))
        return out

    def runs(self, row):
        return [read_run(folder, self.results["references"][row["model"]]["f0"])
                for folder in self.folders(row)]

def speedup(st, out, made):
    for model in st.models:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
        top = 1
        for mode in st.modes:
            ws = st.workers_of(model, mode)
            rows = [st.best(model, mode, w) for w in ws]
            ts = [(w, r["time_speedup"]) for w, r in zip(ws, rows) if r and r["time_speedup"]]
            hs = [(w, r["hardware_efficiency"]) for w, r in zip(ws, rows)
                  if r and r["hardware_efficiency"]]
            if ts:
                ax[0].plot(*zip(*ts), marker="o", label=mode)
            if hs:
                ax[1].plot(*zip(*hs), marker="o", label=mode)
            top = max([top] + ws)
        ticks = sorted({w for m in st.modes for w in st.workers_of(model, m)})
        for a, title in zip(ax, ("speed-up to the target loss (serial's time / this)",
                                 "throughput / the same mode with 1 worker")):
            a.plot([1, top], [1, top], "k--", lw=1, label="ideal")
            a.set_xticks(ticks)
            a.set_xlabel("workers")
            a.set_title(title, fontsize=10)
            a.grid(alpha=0.3)
            legend(a, fontsize=8)
        fig.suptitle(f"{model}: speed-up against workers")
        save(fig, out, f"speedup-{model}", made)


def suboptimality(st, out, made):
    for model in st.models:
        ref = st.results["references"][model]
        fstar, f0 = ref["f_star"], ref["f0"]
        if not f0 > fstar:  # (a step too small to move, or a test set the model does worse on)
            print(f"hogwild_plot: {model}: no suboptimality figure: the starting loss f0 = {f0:.5g} is "
                  f"not above the best f* = {fstar:.5g}", file=sys.stderr)
            continue
        modes = [m for m in st.modes if st.workers_of(model, m)]
        fig, axes = plt.subplots(2, len(modes), figsize=(4.2 * len(modes), 7), squeeze=False,
                                 layout="constrained")
        for j, mode in enumerate(modes):
            for w in st.workers_of(model, mode):
                row = st.best(model, mode, w)
                if not row:
                    continue
                runs = st.runs(row)
                if not runs:
                    continue
                n = min(len(r["curve"]) for r in runs)
                for i, axis in ((0, 0), (1, 1)):  # against time, against updates
                    xs = [sorted(r["curve"][k][axis] for r in runs)[len(runs) // 2] for k in range(n)]
                    vals = [[max((r["curve"][k][2] - fstar) / (f0 - fstar), 1e-6) for r in runs]
                            for k in range(n)]
                    med = [sorted(v)[len(v) // 2] for v in vals]
                    line, = axes[i][j].plot(xs, med, marker=".", label=f"{w} worker(s), lr {row['lr']:g}")
                    axes[i][j].fill_between(xs, [min(v) for v in vals], [max(v) for v in vals],
                                            color=line.get_color(), alpha=0.2)
            axes[0][j].set_title(mode)
            axes[0][j].set_xlabel("seconds")
            axes[1][j].set_xlabel("examples (updates)")
            for i in range(2):
                axes[i][j].set_yscale("log")
                axes[i][j].axhline(st.results["eps"], color="k", ls=":", lw=1)
                axes[i][j].grid(alpha=0.3)
                legend(axes[i][j], fontsize=7)
            if j == 0:
                axes[0][j].set_ylabel("(f - f*) / (f0 - f*)")
                axes[1][j].set_ylabel("(f - f*) / (f0 - f*)")
        fig.suptitle(f"{model}: test-loss suboptimality, median and band over seeds (dotted: the target)")
        save(fig, out, f"suboptimality-{model}", made)


def efficiency(st, out, made):
    for model in st.models:
        fig, ax = plt.subplots(1, 3, figsize=(13, 4.3), layout="constrained")
        ticks = sorted({w for m in st.modes for w in st.workers_of(model, m)})
        for mode in st.modes:
            ws = st.workers_of(model, mode)
            rows = [(w, st.best(model, mode, w)) for w in ws]
            for a, key in zip(ax, ("statistical_efficiency", "hardware_efficiency", "speedup")):
                pts = [(w, r[key]) for w, r in rows if r and r[key] is not None]
                if pts:
                    a.plot(*zip(*pts), marker="o", label=mode)
        for a, title in zip(ax, ("statistical efficiency\n(serial's updates to target / these)",
                                 "hardware efficiency\n(throughput / 1 worker's)", "their product")):
            a.set_title(title, fontsize=10)
            a.set_xticks(ticks)
            a.set_xlabel("workers")
            a.axhline(1, color="k", lw=0.8, ls=":")
            a.grid(alpha=0.3)
            legend(a, fontsize=8)
        fig.suptitle(f"{model}: where the speed-up comes from")
        save(fig, out, f"efficiency-{model}", made)


def staleness(st, out, made):
    drawn = False
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    styles = {"hogwild": "-", "atomic": "--"}
    for model in st.models:
        for mode in ("hogwild", "atomic"):
            for w in st.workers_of(model, mode):
                row = st.best(model, mode, w)
                runs = st.runs(row) if row else []
                runs = [r for r in runs if r.get("staleness")]
                if not runs:
                    continue
                st_ = runs[0]["staleness"]
                s = st_["lag"]
                hist = st_.get("lag_histogram")
                # The tail: the fraction of sampled updates whose lag is at least x.
                if hist:  # the measured histogram (buckets exact to 15, then log-linear)
                    total = sum(c for _, c in hist)
                    xs, ys, above = [], [], total
                    for lo, c in hist:
                        xs.append(lo)
                        ys.append(above / total)
                        above -= c
                    xs.append(s["max"] + 1)
                    ys.append(max(above, 0.5) / total)
                else:  # an older summary: the quantiles
                    xs = [0] + [s[k] for k in ("p50", "p90", "p99", "max")]
                    ys = [1.0, 0.5, 0.1, 0.01, 1.0 / max(s["samples"], 1)]
                ax.step(xs, ys, where="post", marker="o", ms=3,
                        ls=styles[mode], alpha=0.8, lw=2.5 if mode == "hogwild" else 1.5,
                        label=f"{model} {mode}, {w} worker(s) (mean {s['mean']:.2f})")
                drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("log")
    ax.set_xlabel("lag x (examples of the other workers that finished during an update)")
    ax.set_ylabel("fraction of sampled updates with lag >= x")
    ax.set_title("Staleness of the sampled updates (--telemetry): the tail of the CDF", fontsize=10)
    ax.grid(alpha=0.3)
    legend(ax, fontsize=7)
    save(fig, out, "staleness", made)


def lost_mass(st, out, made):
    for model in st.models:
        bars = []
        for mode in st.modes:
            ws = st.workers_of(model, mode)
            if not ws:
                continue
            row = st.best(model, mode, max(ws))
            # (per sampled coordinate: --conflicts' runs; a simulated run has its
            # lost mass in total only)
            runs = [r for r in (st.runs(row) if row else [])
                    if (r.get("conflicts") or {}).get("coordinates")]
            if runs:
                bars.append((f"{mode} x{max(ws)}", runs[0]["conflicts"]["coordinates"]))
        if not bars:
            continue
        names = [c["what"] for c in bars[0][1]][:12]  # the bias and the hottest features
        fig, ax = plt.subplots(figsize=(12, 4.2))
        width = 0.8 / len(bars)
        for i, (label, coords) in enumerate(bars):
            vals = [max(c["lost_mass"], 1e-8) for c in coords[:len(names)]]
            ax.bar([k + i * width for k in range(len(names))], vals, width, label=label)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(names))])
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("lost-update mass")
        ax.set_title(f"{model}: lost-update mass per sampled coordinate (bias, top-k, random)",
                     fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        legend(ax, fontsize=8)
        save(fig, out, f"lost-mass-{model}", made)


def stability(st, out, made):
    for model in st.models:
        modes = [m for m in st.modes if st.workers_of(model, m)]
        lrs = sorted({r["lr"] for r in st.rows if r["model"] == model})
        fig, axes = plt.subplots(1, len(modes), figsize=(4.4 * len(modes), 3.8), squeeze=False,
                                 layout="constrained")
        for j, mode in enumerate(modes):
            ws = st.workers_of(model, mode)
            grid = [[math.nan] * len(lrs) for _ in ws]
            a = axes[0][j]
            for r in st.rows:
                if (r["model"], r["mode"]) != (model, mode):
                    continue
                i, k = ws.index(r["workers"]), lrs.index(r["lr"])
                if r["diverged"]:
                    a.text(k, i, "x", ha="center", va="center", color="red", fontsize=14)
                elif r["final_loss"] is not None:
                    grid[i][k] = r["final_loss"]
            im = a.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
            a.set_xticks(range(len(lrs)))
            a.set_xticklabels([f"{x:g}" for x in lrs])
            a.set_yticks(range(len(ws)))
            a.set_yticklabels(ws)
            a.set_xlabel("step size")
            a.set_ylabel("workers")
            a.set_title(mode)
            fig.colorbar(im, ax=a, fraction=0.046)
        fig.suptitle(f"{model}: final test loss over step size x workers (x: diverged)")
        save(fig, out, f"stability-{model}", made)


def fig2_table(st, out, made):
    lines = ["| model | mode | workers | lr | time for the epochs (s) | train loss | test error "
             "(RMSE for regression) | time to target (s) |", "|---|---|---|---|---|---|---|---|"]
    for model in st.models:
        for mode in st.modes:
            for w in st.workers_of(model, mode):
                row = st.best(model, mode, w)
                runs = st.runs(row) if row else []
                if not runs:
                    continue
                med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
                secs = med([r["train_seconds"] for r in runs])
                train_loss = med([r["train_loss"] for r in runs if r["train_loss"] is not None] or [math.nan])
                acc = [r["test_accuracy"] for r in runs if r.get("test_accuracy") is not None]
                rmse = [r["test_rmse"] for r in runs if r.get("test_rmse") is not None]
                err = f"{1 - med(acc):.4f}" if acc else f"RMSE {med(rmse):.4f}" if rmse else "—"
                ttt = row["time_to_target"]
                lines.append(f"| {model} | {mode} | {w} | {row['lr']:g} | {secs:.3f} | "
                             f"{train_loss:.4f} | {err} | {'—' if ttt is None else f'{ttt:.3f}'} |")
    path = os.path.join(out, "table.md")
    with open(path, "w") as f:
        f.write(f"Hogwild! Fig. 2-style table ({st.spec['epochs']} epochs, medians over "
                f"{st.spec['seeds']} seed(s), the fastest step size per row)\n\n" + "\n".join(lines) + "\n")
    made.append(path)


def plot_run(folder, out, made):
    r = read_run(folder)
    if not r["curve"]:
        fail(f"{folder}/metrics.jsonl has no end-of-epoch evaluation with a test loss")
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    t, s, loss = zip(*r["curve"])
    ax[0].plot(t, loss, marker="o")
    ax[0].set_xlabel("seconds")
    ax[1].plot(s, loss, marker="o")
    ax[1].set_xlabel("examples (updates)")
    for a in ax:
        a.set_ylabel("test loss")
        a.grid(alpha=0.3)
    fig.suptitle(f"{r.get('model')} --mode {r.get('mode')} x{r.get('workers')}")
    save(fig, out, "run", made)


def main():
    p = argparse.ArgumentParser(prog="hogwild_plot", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="a hogwild_sweep --out folder, or a run's folder")
    p.add_argument("--out", default="", help="default: FOLDER/plots")
    a = p.parse_args()
    global FOLDER
    FOLDER = a.folder
    if not os.path.exists(a.folder):
        fail(f"no such folder: {a.folder}")
    if not os.path.isdir(a.folder):
        fail(f"{a.folder}: not a folder (give a hogwild_sweep --out folder, or a run's folder)")
    if a.out == "-":
        fail("--out -: the figures are files (PNG and SVG); give a folder")
    out = a.out or os.path.join(a.folder, "plots")
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out {out}: not a folder")
    made = []
    global CAPTION
    if os.path.exists(os.path.join(a.folder, "results.json")):
        st = Study(a.folder)
        CAPTION = caption(st.summaries())
        os.makedirs(out, exist_ok=True)  # (once there is something to draw)
        for figure in (speedup, suboptimality, efficiency, staleness, lost_mass, stability, fig2_table):
            figure(st, out, made)
    elif os.path.exists(os.path.join(a.folder, "summary.json")):
        CAPTION = caption([load_json(os.path.join(a.folder, "summary.json"))])
        os.makedirs(out, exist_ok=True)
        plot_run(a.folder, out, made)
    else:
        fail(f"{a.folder} holds neither a sweep (results.json) nor a run (summary.json)")
    for m in made:
        print(m)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        # A field the checks above do not name, of another type or missing: a file
        # edited by hand, or from another version. Said, not a traceback.
        fail(f"the files in {FOLDER} are not as hogwild_sweep and hogwild_train write them, or "
             f"hogwild_plot has a bug ({type(e).__name__}: {e})")
    except OSError as e:  # a file or folder it could not read or write: said, not a traceback
        where = e.filename if e.filename is not None else "?"
        print(f"hogwild_plot: error: {where}: {e.strerror or e}", file=sys.stderr)
        sys.exit(4 if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else 2)
    except KeyboardInterrupt:
        sys.exit(130)
