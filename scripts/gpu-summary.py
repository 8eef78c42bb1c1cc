#!/usr/bin/env python3
"""The GPU kit's figures as Markdown tables (gpu-kit/summary.py OUTDIR): what
bench_gpu measured, and for each time-to-loss group the examples/s, the final test
figures and the time to reach the CPU run's final test loss (within 1 %), from the
runs' summaries and metrics. Printed to stdout; run.sh writes it to summary.md."""
import json
import os
import sys

out = sys.argv[1]


def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def epochs(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def rate(x):
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k"


def machine():
    try:
        text = open(os.path.join(out, "machine.txt")).read()
    except OSError:
        return "?"
    gpu = next((l.strip() for l in text.splitlines() if "NVIDIA" in l and "|" in l), "no GPU listed")
    cpu = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("Model name")), "?")
    cores = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("CPU(s)")), "?")
    return f"GPU: {gpu}; CPU: {cpu}, {cores} CPUs"


print(f"# GPU kit figures\n\n{machine()}\n")
b = load("bench_gpu.json")
if b:
    print("## bench_gpu\n\n| figure | value |\n|---|---|")
    print(f"| device | {b.get('device', '?')} |")
    print(f"| copy kernel (read + write) | {b['copy_gb_per_s']:.0f} GB/s |")
    lr = b.get("sparse_lr", {})
    if lr:
        print(f"| sparse LR hogwild | {rate(lr['updates_per_s'])} updates/s, "
              f"{100 * lr['fraction_of_copy']:.0f} % of the copy kernel's bytes/s (target >= 50 %) |")
        if "shared_rows_updates_per_s" in lr:
            print(f"| sparse LR, rows in the device arena | {rate(lr['shared_rows_updates_per_s'])} "
                  f"updates/s ({lr['shared_rows_updates_per_s'] / lr['updates_per_s']:.2f}x a "
                  f"worker's own copy) |")
        for mode, r in lr.get("modes", {}).items():
            print(f"| sparse LR {mode} | {rate(r)} updates/s ({r / lr['updates_per_s']:.3f}x hogwild) |")
    for key, label in (("mf", "fp32"), ("mf_fp16", "fp16")):
        if key in b:
            print(f"| MF rank 32 hogwild, {label} factors | {rate(b[key]['updates_per_s'])} ratings/s, "
                  f"{100 * b[key]['fraction_of_copy']:.0f} % of the copy kernel's bytes/s |")
    for h in b.get("hand_offs", []):
        if "error" in h:
            print(f"| hand-offs | {h['error']} |")
        else:
            print(f"| hand-offs ({h['ipc']}) | {h['hand_offs_per_s']:.0f}/s, "
                  f"{h['checksum_mismatches']} checksum mismatches in {h['rounds']} |")
    if "context" in b:
        print(f"| CUDA context per process | {b['context']['context_mib']:.0f} MiB |")
    print()
else:
    print("bench_gpu: no figures (bench_gpu.json missing)\n")


def group(title, names, figure):
    rows = []
    base = None
    for name in names:
        s, m = load(name + ".json"), epochs(name + ".jsonl")
        if s is None:
            if os.path.exists(os.path.join(out, name + ".txt")):
                rows.append((name, None, None, None))
            continue
        final = m[-1] if m else s
        rows.append((name, s, m, final))
        if base is None:
            base = final.get("test_loss")  # the first run (the CPU's) sets the target
    if not rows:
        return
    print(f"## {title}\n")
    if base is not None:
        print(f"Target: test loss <= {1.01 * base:.4f} (1.01 x the first run's final).\n")
    print(f"| run | examples/s | test loss | {figure} | time to target | train seconds |")
    print("|---|---|---|---|---|---|")
    cpu_time = None
    for name, s, m, final in rows:
        if s is None:
            print(f"| {name} | failed (see {name}.txt) | | | | |")
            continue
        hit = next((e["time"] for e in m if base is not None and e.get("test_loss") is not None
                    and e["test_loss"] <= 1.01 * base), None)
        if cpu_time is None:
            cpu_time = hit
        ratio = f" ({cpu_time / hit:.2f}x the first)" if hit and cpu_time else ""
        fig = final.get("test_" + figure)
        print(f"| {name} | {rate(s['samples_per_second'])} | {final.get('test_loss', float('nan')):.4f} | "
              f"{fig if fig is None else f'{fig:.4f}'} | "
              f"{'not reached' if hit is None else f'{hit:.2f} s'}{ratio} | {s['train_seconds']:.2f} |")
    print()


files = sorted(os.listdir(out))
ttl = [f[:-4] for f in files if f.startswith("ttl-") and not f.startswith("ttl-mf") and f.endswith(".txt")]
group("Sparse LR, RCV1-like (time to loss)", sorted(ttl, key=lambda n: (not n.startswith("ttl-cpu"), n)),
      "accuracy")
mf = [f[:-4] for f in files if f.startswith("ttl-mf") and f.endswith(".txt")]
group("MF rank 32, Netflix-like (time to loss)", sorted(mf, key=lambda n: (not n.startswith("ttl-mf-cpu"), n)),
      "rmse")
for model in ("softmax", "mlp"):
    runs = [f[:-4] for f in files if f.startswith(f"fashion-{model}-") and f.endswith(".txt")]
    group(f"Fashion-MNIST {model}", sorted(runs, key=lambda n: ("-cpu-" not in n, n)), "accuracy")
