"""bench/run.sh's `gpu` section (bench/suite.py calls run(suite)): bench_gpu's
figures (docs/GPU.md) — the copy kernel's bandwidth as the yardstick, the sparse
LR and MF kernels' updates/s and the fraction of the yardstick their bytes reach
(target >= 50 % for the sparse kernel), 10,000 checked hand-offs between two
processes by each IPC path, and a CUDA context's device memory. Without a CUDA
device (or a build without CUDA) the section says so and records nothing.
"""
import json
import os
import subprocess


def run(s):
    exe = os.path.join(s.build, "bench", "bench_gpu")
    if not os.path.exists(exe):
        s.note("gpu: this build has no CUDA code (bench_gpu not built)")
        return
    out = s.tmpfile("gpu") + ".json"
    args = [exe, "--json", out]
    if s.a.quick:
        args += ["--rows", "50000", "--ratings", "1000000", "--hand-offs", "2000"]
    print("\n== the GPU section (bench_gpu)", flush=True)
    p = subprocess.run(args, capture_output=True, text=True)
    print(p.stdout + p.stderr, flush=True)
    if p.returncode == 77:
        s.note("gpu: skipped, " + p.stdout.strip().removeprefix("SKIP: "))
        return
    if p.returncode != 0:
        s.note(f"gpu: bench_gpu failed (exit {p.returncode})")
        return
    with open(out) as f:
        g = json.load(f)
    s.runs.append({"section": "gpu", **{k: v for k, v in g.items() if not isinstance(v, list)}})
    rows = [["copy kernel (yardstick)", f"{g['copy_gb_per_s']:.0f} GB/s", "", ""]]
    for name, key in (("sparse LR, hogwild (RCV1-like)", "sparse_lr"), ("MF rank 32, hogwild", "mf")):
        k = g[key]
        rows.append([name, f"{k['updates_per_s']:.3g} updates/s", f"{k['bytes_per_update']:.0f} B",
                     f"{100 * k['fraction_of_copy']:.0f} %"])
    for h in g.get("hand_offs", []):
        if "error" in h:
            rows.append(["hand-offs", h["error"], "", ""])
        else:
            rows.append([f"hand-offs ({h['ipc']}), {h['rounds']} rounds",
                         f"{h['hand_offs_per_s']:.0f} /s", f"{h['checksum_mismatches']} mismatches", ""])
    rows.append(["CUDA context", f"{g['context']['context_mib']:.0f} MiB a process", "", ""])
    s.table(f"GPU: {g['device']}", ["figure", "rate", "per update", "of the yardstick"], rows)
