#!/usr/bin/env bash
# Packs what the GPU suite and bench need into gpu-kit.tar.xz: the release build's
# GPU tests, bench and CLIs, libhogwild, and every shared library they load that is
# not the C library's (a GPU machine may have no Boost, TBB, oneDNN or package
# registry; both are x86-64). On the GPU machine (docs/GPU.md):
#
#   tar xf gpu-kit.tar.xz && gpu-kit/run.sh OUTDIR
#
# runs the GPU tests and the GPU bench and leaves the logs and figures in OUTDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
if [ ! -x build/bench/bench_gpu ]; then
  echo "gpu-kit: this build has no CUDA code (no CUDA toolkit found): nothing to pack" >&2
  exit 1
fi
kit=gpu-kit
rm -rf "$kit" gpu-kit.tar.xz
mkdir -p "$kit/bin" "$kit/lib"
cp build/src/hogwild_train build/src/hogwild_data build/tests/test_cuda \
   build/tests/test_device_arena build/tests/test_memory_space build/bench/bench_gpu \
   build/examples/gpu_trainer build/examples/gpu_kernel build/bench/bench_prepare build/bench/bench_contention "$kit/bin/"
for lib in $(LD_LIBRARY_PATH="$PWD/build/src" ldd "$kit"/bin/* | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;  # the machine's own
    *) cp -L "$lib" "$kit/lib/" ;;
  esac
done
cp scripts/gpu-run.sh "$kit/run.sh"
cp scripts/gpu-summary.py "$kit/summary.py"
cp bench/cpu_scaling.py bench/bench_memory.py bench/suite*.py "$kit/"  # cpu_name: suite.py
# Fashion-MNIST (30 MB), where this machine has it: the softmax and MLP runs.
fashion=/usr/share/datasets/fashion-mnist
if [ -f "$fashion/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$kit/fashion-mnist"
  cp "$fashion"/*-ubyte.gz "$kit/fashion-mnist/"
fi
git rev-parse --short HEAD > "$kit/commit" 2>/dev/null || true
tar cJf gpu-kit.tar.xz "$kit"
echo "gpu-kit.tar.xz: $(du -h gpu-kit.tar.xz | cut -f1) ($(ls "$kit/lib" | wc -l) libraries)"
