#!/usr/bin/python3
"""The PyTorch Hogwild pattern, as the peer that hogwild_train is compared with.

Builds the model, calls model.share_memory(), forks N torch.multiprocessing
processes (start method "fork"), each with torch.set_num_threads(1), its own
contiguous shard (cut before the fork) and its own optim.SGD over the shared
parameters -- the recipe of PyTorch's examples/mnist_hogwild. Run with
OPENBLAS_NUM_THREADS=1 and Debian's libopenblas0-pthread installed, otherwise
torch runs dense layers on the reference BLAS and the comparison flatters us.

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/compare/torch_hogwild.py \
      --model softmax --train .../train-images-idx3-ubyte.gz \
      --test .../t10k-images-idx3-ubyte.gz --workers 2 --batch 32 --epochs 3 --lr 0.1

Prints one JSON object: examples/s (all workers, first start to last finish),
test accuracy and loss, and the proportional set size of the process tree.
bench/suite.py runs it beside hogwild_train with the same settings.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def open_maybe_gz(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def read_idx(images_path):
    labels_path = images_path.replace("images-idx3", "labels-idx1")
    with open_maybe_gz(images_path) as f:
        raw = f.read()
    n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)
    with open_maybe_gz(labels_path) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def read_libsvm(path):
    """CSR arrays (offsets, 0-based indices, values) and 0/1 labels."""
    offsets, indices, values, labels = [0], [], [], []
    with open_maybe_gz(path) as f:
        for line in f:
            parts = line.split(b"#", 1)[0].split()
            if not parts:
                continue
            labels.append(1.0 if float(parts[0]) > 0 else 0.0)
            for tok in parts[1:]:
                k, v = tok.split(b":")
                if k == b"qid":
                    continue
                indices.append(int(k) - 1)
                values.append(float(v))
            offsets.append(len(indices))
    return (torch.tensor(offsets, dtype=torch.int64), torch.tensor(indices, dtype=torch.int64),
            torch.tensor(values, dtype=torch.float32), torch.tensor(labels, dtype=torch.float32))


class SparseLogistic(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.w = nn.EmbeddingBag(features, 1, mode="sum", sparse=True)
        nn.init.zeros_(self.w.weight)
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, idx, offsets, weights):
        return self.w(idx, offsets, per_sample_weights=weights).squeeze(1) + self.b


def dense_model(name, hidden):
    if name == "softmax":
        m = nn.Linear(784, 10)
        nn.init.zeros_(m.weight)
        nn.init.zeros_(m.bias)
        return m
    layers, width = [], 784
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, 10))


def pss_bytes():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def train_dense(rank, model, x, y, args, lo, hi, out):
    torch.set_num_threads(1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(args.seed + rank)
    out[rank, 0] = time.monotonic()
    for _ in range(args.epochs):
        perm = lo + torch.randperm(hi - lo, generator=g)
        for s in range(0, hi - lo, args.batch):
            b = perm[s:s + args.batch]
            opt.zero_grad()
            # --bf16: the products on bfloat16 operands (CPU autocast; the weights
            # and the step stay float), as hogwild_train --matmul-precision bf16.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                loss = F.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step()
    out[rank, 1] = time.monotonic()
    out[rank, 2] = pss_bytes()


def train_sparse(rank, model, data, args, lo, hi, out):
    torch.set_num_threads(1)
    offsets, indices, values, labels = data
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(args.seed + rank)
    out[rank, 0] = time.monotonic()
    for _ in range(args.epochs):
        perm = (lo + torch.randperm(hi - lo, generator=g)).tolist()
        for s in range(0, hi - lo, args.batch):
            rows = perm[s:s + args.batch]
            idx, val, off = [], [], []
            for r in rows:  # gather the batch's rows into EmbeddingBag's flat form
                a, e = int(offsets[r]), int(offsets[r + 1])
                off.append(sum(t.numel() for t in idx))
                idx.append(indices[a:e])
                val.append(values[a:e])
            opt.zero_grad()
            z = model(torch.cat(idx), torch.tensor(off), torch.cat(val))
            F.binary_cross_entropy_with_logits(z, labels[rows]).backward()
            opt.step()
    out[rank, 1] = time.monotonic()
    out[rank, 2] = pss_bytes()


def evaluate(model, args, test):
    with torch.no_grad():
        if args.model == "logistic":
            offsets, indices, values, labels = test
            keep = indices < args.features  # features the training set never saw score 0
            z = model(indices[keep], torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.int64),
                      torch.tensor([int(keep[int(offsets[r]):int(offsets[r + 1])].sum())
                                    for r in range(len(labels))])]), 0)[:-1], values[keep])
            loss = F.binary_cross_entropy_with_logits(z, labels).item()
            acc = ((z > 0).float() == labels).float().mean().item()
        else:
            x, y = test
            z = model(x)
            loss = F.cross_entropy(z, y).item()
            acc = (z.argmax(1) == y).float().mean().item()
    return loss, acc


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["softmax", "mlp", "logistic"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bf16", action="store_true",
                   help="dense models: CPU autocast to bfloat16 for the products")
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    if args.model == "logistic":
        train, test = read_libsvm(args.train), read_libsvm(args.test)
        args.features = int(train[1].max()) + 1
        model = SparseLogistic(args.features)
        n = len(train[3])
    else:
        train, test = read_idx(args.train), read_idx(args.test)
        model = dense_model(args.model, [int(h) for h in args.hidden.split(",")])
        n = len(train[1])
    model.share_memory()
    out = torch.zeros(args.workers, 3, dtype=torch.float64).share_memory_()
    procs = []
    for rank in range(args.workers):
        lo, hi = n * rank // args.workers, n * (rank + 1) // args.workers
        target = train_sparse if args.model == "logistic" else train_dense
        extra = (train,) if args.model == "logistic" else train
        proc = mp.get_context("fork").Process(target=target,
                                              args=(rank, model, *extra, args, lo, hi, out))
        proc.start()
        procs.append(proc)
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise SystemExit(f"worker exited with {proc.exitcode}")
    seconds = float(out[:, 1].max() - out[:, 0].min())
    loss, acc = evaluate(model, args, test)
    print(json.dumps({
        "framework": "pytorch " + torch.__version__, "model": args.model,
        "matmul_precision": "bf16" if args.bf16 else "fp32",
        "workers": args.workers, "batch": args.batch, "epochs": args.epochs, "lr": args.lr,
        "train_seconds": seconds, "samples_per_second": n * args.epochs / seconds,
        "test_loss": loss, "test_accuracy": acc,
        "pss_tree_bytes": pss_bytes() + int(out[:, 2].sum()),
    }))


if __name__ == "__main__":
    main()
