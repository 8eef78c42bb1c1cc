#!/usr/bin/python3
"""PyTorch DistributedDataParallel on CPU, the peer of hogwild_train --mode ddp.

N processes (torch.multiprocessing, start method "fork", torch.set_num_threads(1)
each) join a Gloo process group over loopback, wrap the model in
DistributedDataParallel (gradients all-reduced and averaged every step), and train
on their DistributedSampler shards (reshuffled each epoch with the seed, the same
count of rows each), --batch rows per rank and step. The batches are taken from
the sampler's indices with index_select on tensors loaded once, so PyTorch pays no
DataLoader overhead. Run with OPENBLAS_NUM_THREADS=1 and Debian's
libopenblas0-pthread, as torch_hogwild.py says.

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/compare/torch_ddp.py \
      --model softmax --train .../train-images-idx3-ubyte.gz \
      --test .../t10k-images-idx3-ubyte.gz --workers 2 --batch 32 --epochs 3 --lr 0.1

Prints one JSON object, as torch_hogwild.py does.
"""
import argparse
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from torch_hogwild import dense_model, evaluate, pss_bytes, read_idx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(rank, args, x, y, out, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.workers)
    torch.manual_seed(args.seed)  # the same initial weights; DDP broadcasts rank 0's anyway
    model = DistributedDataParallel(dense_model(args.model, [int(h) for h in args.hidden.split(",")]))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    sampler = DistributedSampler(range(len(y)), num_replicas=args.workers, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=True)
    dist.barrier()
    out[rank, 0] = time.monotonic()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.int64)
        for s in range(0, len(order), args.batch):
            b = order[s:s + args.batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(x.index_select(0, b)), y.index_select(0, b))
            loss.backward()
            opt.step()
    out[rank, 1] = time.monotonic()
    out[rank, 2] = pss_bytes()
    if rank == 0:
        loss, acc = evaluate(model.module, args, args.test_set)
        out[0, 3], out[0, 4] = loss, acc
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["softmax", "mlp"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32, help="rows per rank and step")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    x, y = read_idx(args.train)
    args.test_set = read_idx(args.test)
    out = torch.zeros(args.workers, 5, dtype=torch.float64).share_memory_()
    port = free_port()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=train, args=(r, args, x, y, out, port)) for r in range(args.workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise SystemExit(f"rank exited with {proc.exitcode}")
    seconds = float(out[:, 1].max() - out[:, 0].min())
    n = len(y) // args.workers * args.workers  # drop_last
    print(json.dumps({
        "framework": "pytorch " + torch.__version__ + " DDP (gloo)", "model": args.model,
        "workers": args.workers, "batch": args.batch, "epochs": args.epochs, "lr": args.lr,
        "train_seconds": seconds, "samples_per_second": n * args.epochs / seconds,
        "test_loss": float(out[0, 3]), "test_accuracy": float(out[0, 4]),
        "pss_tree_bytes": pss_bytes() + int(out[:, 2].sum()),
    }))


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main()
