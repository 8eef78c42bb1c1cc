#!/usr/bin/env bash
# The GPU suite and bench, on a machine with an NVIDIA GPU, from the kit that
# scripts/gpu-kit.sh packs (as gpu-kit/run.sh): the GPU tests (device memory across
# processes by both IPC paths, its lifetime, out of memory, the fork guard, every
# model the GPU trains in every mode against the CPU), the GPU bench (bandwidth
# yardstick, kernels, hand-offs, context memory), and the time to a target loss of
# the CPU's hogwild on every core against the GPU's (sparse LR, with and without MPS;
# MF with fp32 and fp16 factors). Logs and figures go to OUTDIR;
# the last line says what passed. Exit 0: all passed; 1: something failed; 77: no
# CUDA device here (the tests' host cases ran; the GPU runs were not made).
#
#   run.sh OUTDIR [PARTS]   PARTS: tests,bench,runs (the default: all three), so that
#                           a machine lent for minutes at a time can take them apart
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:-$kit/out}
parts=",${2:-tests,bench,runs},"
mkdir -p "$out"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HOGWILD_TRAIN="$kit/bin/hogwild_train" HOGWILD_DATA="$kit/bin/hogwild_data"
(nvidia-smi; lscpu) > "$out/machine.txt" 2>&1
failed=0
# Whether a CUDA device is here: nvidia-smi lists one, and test_cuda and bench_gpu do not skip.
nvidia-smi -L > /dev/null 2>&1 && gpu=1 || gpu=0
if [[ $parts == *,tests,* ]]; then
  for t in test_device_arena test_memory_space test_cuda gpu_trainer gpu_kernel; do
    "$kit/bin/$t" > "$out/$t.txt" 2>&1
    rc=$?
    echo "$t: exit $rc$([ $rc = 77 ] && echo ' (skipped: no GPU)')" | tee -a "$out/status.txt"
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || failed=1
    [ "$t" = test_cuda ] && [ "$rc" = 77 ] && gpu=0
  done
fi
if [[ $parts == *,bench,* ]]; then
  "$kit/bin/bench_gpu" --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.txt"
  rc=${PIPESTATUS[0]}
  echo "bench_gpu: exit $rc" | tee -a "$out/status.txt"
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || failed=1
  [ "$rc" = 77 ] && gpu=0
fi
if [ "$gpu" = 0 ]; then
  echo "gpu suite: no CUDA device here: the GPU runs are not made;" \
       "$([ $failed = 0 ] && echo 'the host cases passed' || echo FAILED)" | tee -a "$out/status.txt"
  [ $failed = 0 ] && exit 77
  exit 1
fi
if [[ $parts != *,runs,* ]]; then
  echo "gpu suite: $([ $failed = 0 ] && echo passed || echo FAILED) ($parts)" | tee -a "$out/status.txt"
  exit $failed
fi

# hogwild_train ARGS, its output in OUTDIR/NAME.txt, summary in NAME.json and each
# epoch's figures in NAME.jsonl; its exit and last line in status.txt. A run that
# fails fails the suite.
run_train() {
  local name=$1
  shift
  "$kit/bin/hogwild_train" "$@" --summary "$out/$name.json" --metrics "$out/$name.jsonl" \
    > "$out/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc ($(tail -1 "$out/$name.txt"))" | tee -a "$out/status.txt"
  [ "$rc" = 0 ] || failed=1
}

# Time to a target loss: RCV1-like rows, logistic regression, hogwild on every core
# against the GPU (its metrics files have the test loss after each epoch).
data="$out/data"
mkdir -p "$data"
"$kit/bin/hogwild_data" generate --rows 440000 --features 47236 --nnz-per-row 75 --seed 3 \
  --out "$data/all.svm" > /dev/null
head -n 400000 "$data/all.svm" > "$data/rcv1like.svm"  # one hidden model: split, not two seeds
tail -n 40000 "$data/all.svm" > "$data/rcv1like.test.svm"
cores=$(nproc)
rcv1like=(--train "$data/rcv1like.svm" --test "$data/rcv1like.test.svm" --model logistic
          --epochs 10 --lr 0.5 --storage sparse)
for run in "cpu $cores" "cuda 1" "cuda 2"; do
  set -- $run
  run_train "ttl-$1-$2" "${rcv1like[@]}" --mode hogwild --device "$1" --workers "$2"
done
# Processes on one GPU take turns unless MPS runs: the 2-worker run again under MPS,
# where the machine has its control daemon (the driver's nvidia-cuda-mps-control).
if command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    run_train ttl-cuda-2-mps "${rcv1like[@]}" --mode hogwild --device cuda --workers 2
    echo quit | nvidia-cuda-mps-control
  else
    echo "MPS: the control daemon did not start" | tee -a "$out/status.txt"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "MPS: no nvidia-cuda-mps-control on this machine" | tee -a "$out/status.txt"
fi
# ddp over NCCL: as many ranks as GPUs, sparse LR on the same rows.
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || gpus=1
run_train "ttl-cuda-ddp-$gpus" "${rcv1like[@]}" --mode ddp --batch 256 --device cuda \
  --workers "$gpus"
# MF, Netflix-like ratings (100k users, 17.8k items, 100 ratings a user, rank 32; at a
# tenth of this size on 2 cores, lr 0.01 and l2 0.02 take the test RMSE from 1.04 to
# 0.78 in 10 epochs): hogwild on every core against the GPU with fp32 and fp16
# factors (each epoch's test RMSE in the metrics).
"$kit/bin/hogwild_data" generate --kind ratings --users 100000 --items 17770 --rank 32 \
  --ratings 10000000 --test-ratings 500000 --noise 0.3 --seed 3 \
  --out "$data/ratings.txt" --test-out "$data/ratings.test.txt" > /dev/null
for run in "cpu $cores fp32" "cuda 1 fp32" "cuda 1 fp16" "cuda 2 fp16"; do
  set -- $run
  run_train "ttl-mf-$1-$2-$3" --train "$data/ratings.txt" --test "$data/ratings.test.txt" \
    --model mf --rank 32 --mode hogwild --epochs 20 --lr 0.01 --l2 0.02 --device "$1" \
    --workers "$2" --factors "$3"
done
rm -rf "$data"

# Fashion-MNIST (in the kit where the build machine had it): softmax and the MLP
# (cuBLAS) on every core against the GPU's hogwild and ddp.
f="$kit/fashion-mnist"
if [ -f "$f/train-images-idx3-ubyte.gz" ]; then
  # softmax's lr: 0.005 reaches 0.83 in 5 epochs on 2 cores, 0.05 only 0.70.
  for model in "softmax --lr 0.005" "mlp --hidden 256,128 --lr 0.05 --batch 32"; do
    set -- $model
    for run in "cpu hogwild $cores" "cuda hogwild 1" "cuda hogwild 2" "cuda ddp 1" "streams hogwild 1"; do
      set -- $model $run
      where=${@: -3:1} mode=${@: -2:1} n=${@: -1}
      name="fashion-$1-$where-$mode-$n"
      extra=""
      [ "$mode" = ddp ] && [ "$1" = softmax ] && extra="--batch 32"
      if [ "$where" = streams ]; then  # the MLP alone: 4 streams in one process
        [ "$1" = mlp ] || continue
        where=cuda extra="--device-streams 4"
      fi
      run_train "$name" --train "$f/train-images-idx3-ubyte.gz" \
        --test "$f/t10k-images-idx3-ubyte.gz" --model $model --mode "$mode" --workers "$n" \
        --device "$where" --epochs 5 $extra
    done
  done
fi
# The figures as Markdown tables (GPU.md's "Numbers"), where the machine has Python.
command -v python3 > /dev/null && python3 "$kit/summary.py" "$out" > "$out/summary.md"
echo "gpu suite: $([ $failed = 0 ] && echo passed || echo FAILED) (commit $(cat "$kit/commit" 2>/dev/null))" \
  | tee -a "$out/status.txt"
exit $failed
