#!/usr/bin/env bash
# The GPU suite and bench, on a machine with an NVIDIA GPU, from the kit that
# scripts/gpu-kit.sh packs (as gpu-kit/run.sh): the GPU tests (device memory across
# processes by both IPC paths, its lifetime, out of memory, the fork guard, every
# model the GPU trains in every mode against the CPU), the GPU bench (bandwidth
# yardstick, kernels, hand-offs, context memory), and the time to a target loss of
# the CPU's hogwild on every core against the GPU's. Logs and figures go to OUTDIR;
# the last line says what passed.
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:-$kit/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HOGWILD_TRAIN="$kit/bin/hogwild_train" HOGWILD_DATA="$kit/bin/hogwild_data"
(nvidia-smi; lscpu) > "$out/machine.txt" 2>&1
failed=0
for t in test_device_arena test_memory_space test_cuda; do
  "$kit/bin/$t" > "$out/$t.txt" 2>&1
  rc=$?
  echo "$t: exit $rc$([ $rc = 77 ] && echo ' (skipped: no GPU)')" | tee -a "$out/status.txt"
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || failed=1
done
"$kit/bin/bench_gpu" --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.txt"
echo "bench_gpu: exit ${PIPESTATUS[0]}" | tee -a "$out/status.txt"

# Time to a target loss: RCV1-like rows, logistic regression, hogwild on every core
# against the GPU (its metrics files have the test loss after each epoch).
data="$out/data"
mkdir -p "$data"
"$kit/bin/hogwild_data" generate --rows 440000 --features 47236 --nnz-per-row 75 --seed 3 \
  --out "$data/all.svm" > /dev/null
head -n 400000 "$data/all.svm" > "$data/rcv1like.svm"  # one hidden model: split, not two seeds
tail -n 40000 "$data/all.svm" > "$data/rcv1like.test.svm"
cores=$(nproc)
for run in "cpu --workers $cores" "cuda --workers 1" "cuda --workers 2"; do
  set -- $run
  name="$1-$3"
  "$kit/bin/hogwild_train" --train "$data/rcv1like.svm" --test "$data/rcv1like.test.svm" \
    --model logistic --mode hogwild --epochs 10 --lr 0.5 --storage sparse --device "$1" \
    --workers "$3" --metrics "$out/ttl-$name.jsonl" --summary "$out/ttl-$name.json" \
    > "$out/ttl-$name.txt" 2>&1
  echo "time to loss, $name: exit $? ($(tail -1 "$out/ttl-$name.txt"))" | tee -a "$out/status.txt"
done
rm -rf "$data"
echo "gpu suite: $([ $failed = 0 ] && echo passed || echo FAILED) (commit $(cat "$kit/commit" 2>/dev/null))" \
  | tee -a "$out/status.txt"
exit $failed
