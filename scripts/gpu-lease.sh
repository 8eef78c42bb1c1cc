#!/usr/bin/env bash
# On a lent GPU machine (the device tool, docs/GPU.md): unpack the kit carried as
# gpu-kit.tar.xz, point the loader at the image's NCCL and cuBLAS (the kit carries
# neither), then run each PART within its seconds, and pack what came out into $OUT
# (at most 8 files come back: res.tar.gz, status.txt, summary.md).
#   scripts/gpu-lease.sh PART:SECONDS...
# PART: tests (test_cuda's two training cases side by side with its other cases, those
# one at a time, 60 s each, then the arena tests and the examples, one at a time:
# the memory checks want the device to themselves), sweep (accuracy and examples/s against --device-warps), cpu (the
# machine's cores: bench_contention's yardstick, then bench/cpu_scaling.py's
# hogwild scaling on the RCV1-like set), or one of gpu-kit/run.sh's parts (bench,
# runs).
set -uo pipefail
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
t0=$(date +%s)
tar xf gpu-kit.tar.xz
kit=$PWD/gpu-kit
libs=""
for name in libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
  f=$(find /usr/local/cuda*/ /opt /usr/lib -name "$name" 2>/dev/null | head -1)
  [ -n "$f" ] && libs="$libs:$(dirname "$f")"
done
export LD_LIBRARY_PATH="$kit/lib:${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HOGWILD_TRAIN="$kit/bin/hogwild_train" HOGWILD_DATA="$kit/bin/hogwild_data"
res=/tmp/gpu-res
mkdir -p "$res"
(echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; nproc; nvidia-smi; lscpu) > "$res/machine.txt" 2>&1

tests() {
  local heavy='every model*,--mode ddp on the GPU*'
  timeout -k 5 "$1" "$kit/bin/test_cuda" -tc='every model*' > "$res/test_cuda_models.txt" 2>&1 &
  local a=$!
  timeout -k 5 "$1" "$kit/bin/test_cuda" -tc='--mode ddp on the GPU*' > "$res/test_cuda_ddp.txt" 2>&1 &
  local b=$!
  # The other cases one at a time, each within its own share, so that one that
  # hangs is named (a killed test_cuda loses what it had not flushed).
  local name rc
  "$kit/bin/test_cuda" -ltc -tce="$heavy" 2>/dev/null | sed -n '/^=====/,/^=====/p' | grep -v '^=====' |
    while IFS= read -r name; do
      timeout -k 5 60 "$kit/bin/test_cuda" -tc="${name//,/\\,}" >> "$res/test_cuda_rest.txt" 2>&1
      rc=$?
      echo "test_cuda \"$name\": exit $rc" >> "$res/status.txt"
    done
  for t in test_device_arena test_memory_space gpu_trainer gpu_kernel; do
    timeout -k 5 60 "$kit/bin/$t" > "$res/$t.txt" 2>&1
    echo "$t: exit $?" >> "$res/status.txt"
  done
  wait $a; echo "test_cuda (every model, every mode): exit $?" >> "$res/status.txt"
  wait $b; echo "test_cuda (ddp over NCCL): exit $?" >> "$res/status.txt"
}

# Sparse LR (the tests' problem: 20,000 rows, 2,000 features) at lr 0.5, 2 workers:
# test accuracy and examples/s against the warps a process, hogwild and atomic.
sweep() {
  local d=$res/sweep-data
  mkdir -p "$d"
  "$kit/bin/hogwild_data" generate --rows 25000 --features 2000 --nnz-per-row 20 --seed 7 \
    --out "$d/all.svm" > /dev/null
  head -n 20000 "$d/all.svm" > "$d/train.svm"
  tail -n 5000 "$d/all.svm" > "$d/test.svm"
  "$kit/bin/hogwild_train" --train "$d/train.svm" --test "$d/test.svm" --model logistic \
    --lr 0.5 --epochs 5 --workers 2 > "$res/sweep-cpu.txt" 2>&1
  echo "sweep cpu 2 workers: $(tail -1 "$res/sweep-cpu.txt")" >> "$res/sweep.txt"
  for mode in hogwild atomic; do
    for w in 0 1 8 64 256 1024 8448; do
      "$kit/bin/hogwild_train" --train "$d/train.svm" --test "$d/test.svm" --model logistic \
        --lr 0.5 --epochs 5 --workers 2 --device cuda --mode $mode --device-warps $w \
        > "$res/sweep-$mode-$w.txt" 2>&1
      echo "sweep $mode warps $w: $(grep '^device:' "$res/sweep-$mode-$w.txt") $(tail -1 "$res/sweep-$mode-$w.txt")" >> "$res/sweep.txt"
    done
  done
  rm -rf "$d"
}

# The cores, not the GPU: the contention yardstick (core 0 against every other
# core), then hogwild's scaling against the ceiling.
cpu() {
  "$kit/bin/bench_contention" --json "$res/contention.json" > "$res/contention.md" 2>&1
  echo "bench_contention: exit $?" >> "$res/status.txt"
  python3 "$kit/cpu_scaling.py" --bin "$kit/bin" --prepare "$kit/bin/bench_prepare" \
    --workers 1,2,4,8,16 --reps 2 --out /tmp/scaling > "$res/scaling.txt" 2>&1
  echo "cpu_scaling: exit $?" >> "$res/status.txt"
  cp /tmp/scaling/scaling.md /tmp/scaling/scaling.json "$res/" 2>/dev/null
}

# The MLP on Fashion-MNIST (256,128, batch 32, 5 epochs): worker processes against
# one process's streams (--device-streams), 3 repetitions interleaved, each run's
# examples/s and test accuracy from its summary.
choice() {
  local f=$kit/fashion-mnist rep w k batch=${1:-32} lr=${2:-0.05} configs=${3:-"1:1 2:1 4:1 1:2 1:4 2:2"}
  [ -f "$f/train-images-idx3-ubyte.gz" ] || { echo "choice: no Fashion-MNIST in the kit" >> "$res/choice.txt"; return; }
  for rep in 1 2 3; do
    for wk in $configs; do
      set -- ${wk/:/ }
      w=$1 k=$2
      "$kit/bin/hogwild_train" --train "$f/train-images-idx3-ubyte.gz" \
        --test "$f/t10k-images-idx3-ubyte.gz" --model mlp --hidden 256,128 --lr "$lr" \
        --batch "$batch" --mode hogwild --device cuda --epochs 5 --workers $w --device-streams $k \
        --summary "$res/choice-$batch-$w-$k-$rep.json" > "$res/choice-$batch-$w-$k-$rep.txt" 2>&1
      echo "choice batch $batch workers $w streams $k rep $rep: exit $? $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("samples_per_second"), d.get("test_accuracy", d.get("test", {})))' "$res/choice-$batch-$w-$k-$rep.json" 2>&1 | tail -1)" >> "$res/choice.txt"
    done
  done
}

# --digest's weights_sha256 read from device memory: two serial GPU runs (one warp,
# in order) give the same digest, and a racing run another.
digest() {
  local d=$res/digest-data
  mkdir -p "$d"
  "$kit/bin/hogwild_data" generate --rows 20000 --features 2000 --nnz-per-row 20 --seed 7 \
    --out "$d/train.svm" > /dev/null
  for run in "serial 1 a" "serial 1 b" "hogwild 2 c"; do
    set -- $run
    "$kit/bin/hogwild_train" --train "$d/train.svm" --model logistic --lr 0.5 --epochs 2 \
      --device cuda --mode $1 --workers $2 --digest --summary "$res/digest-$3.json" \
      > "$res/digest-$3.txt" 2>&1
    echo "digest $1 $2 ($3): exit $? $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["weights_sha256"])' "$res/digest-$3.json" 2>&1 | tail -1)" >> "$res/choice.txt"
  done
  rm -rf "$d"
}

# test_cuda's VMM lifetime case again and again (it hung once for more than 60 s).
vmm() {
  local i
  for i in $(seq 1 "$1"); do
    timeout -k 5 40 "$kit/bin/test_cuda" -tc='VMM memory outlives*' > "$res/vmm-$i.txt" 2>&1
    echo "vmm case, try $i: exit $?" >> "$res/status.txt"
  done
}

for part in "$@"; do
  name=${part%%:*} limit=${part##*:}
  s=$(date +%s)
  case $name in
    tests) tests "$limit"; rc=done ;;
    sweep) export -f sweep; export kit res; timeout -k 5 "$limit" bash -c sweep; rc=$? ;;
    choice) export -f choice; export kit res; timeout -k 5 "$limit" bash -c choice; rc=$? ;;
    choice?*) export -f choice; export kit res batch=${name#choice}  # choiceB: --batch B
      timeout -k 5 "$limit" bash -c 'choice $batch $([ $batch -ge 128 ] && echo 0.1 || echo 0.05) "1:1 1:4 2:1"'
      rc=$? ;;
    vmm*) export -f vmm; export kit res; n=${name#vmm}
      timeout -k 5 "$limit" bash -c "vmm ${n:-8}"; rc=$? ;;
    digest) export -f digest; export kit res; timeout -k 5 "$limit" bash -c digest; rc=$? ;;
    cpu) export -f cpu; export kit res; timeout -k 5 "$limit" bash -c cpu; rc=$? ;;
    *) timeout -k 5 "$limit" "$kit/run.sh" "$res" "$name"; rc=$? ;;
  esac
  echo "== part $name: $rc after $(( $(date +%s) - s )) s" | tee -a "$res/status.txt"
done
echo "== total $(( $(date +%s) - t0 )) s" | tee -a "$res/status.txt"
command -v python3 > /dev/null && python3 "$kit/summary.py" "$res" > "$res/summary.md" 2>&1
cp "$res/status.txt" "$out/" 2>/dev/null
cp "$res/summary.md" "$out/" 2>/dev/null
tar czf "$out/res.tar.gz" --exclude=data --exclude=sweep-data --exclude="mps-*" -C /tmp gpu-res
cat "$res/status.txt" "$res/choice.txt" "$res/sweep.txt" "$res/contention.md" "$res/scaling.md" 2>/dev/null
