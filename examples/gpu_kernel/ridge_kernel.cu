// The kernel of gpu_kernel.cpp's model, compiled by nvcc: least squares on sparse
// rows, a warp per example, its lanes over the row's non-zeros, written only
// against the public header hogwild/device_kernel.hpp.
#include <cuda/atomic>

#include "ridge_kernel.hpp"

namespace {

// Reads and writes of the shared weights, by the mode's access. hogwild: relaxed
// device-scope loads and stores (the intended race: a concurrent update may be
// lost); atomic: atomicAdd; serial: plain.
__device__ float load(float* p, hogwild::DeviceAccess a) {
  if (a == hogwild::DeviceAccess::serial) return *p;
  return cuda::atomic_ref<float, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
}

__device__ void add(float* p, float delta, hogwild::DeviceAccess a) {
  if (a == hogwild::DeviceAccess::atomic) {
    atomicAdd(p, delta);
  } else if (a == hogwild::DeviceAccess::hogwild) {
    cuda::atomic_ref<float, cuda::thread_scope_device> r(*p);
    r.store(r.load(cuda::memory_order_relaxed) + delta, cuda::memory_order_relaxed);
  } else {
    *p += delta;
  }
}

__global__ void ridge_kernel(hogwild::DeviceChunk c, float* w) {
  const unsigned lane = threadIdx.x & 31;
  const std::size_t first = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) >> 5;
  const std::size_t warps = (gridDim.x * std::size_t{blockDim.x}) >> 5;
  double losses = 0;
  for (std::size_t i = c.begin + first; i < c.begin + c.count; i += warps) {
    const std::uint32_t r = c.order[i];
    const std::uint64_t begin = c.rows.offsets[r], end = c.rows.offsets[r + 1];
    float z = 0;
    for (std::uint64_t k = begin + lane; k < end; k += 32)
      z += load(w + c.rows.index[k], c.access) * c.rows.value[k];
    for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
    const float residual = z - c.rows.target[r];
    for (std::uint64_t k = begin + lane; k < end; k += 32)
      add(w + c.rows.index[k], -c.lr * residual * c.rows.value[k], c.access);
    losses += 0.5 * static_cast<double>(residual) * residual;
  }
  if (lane == 0 && losses != 0) atomicAdd(c.loss_sum, losses);
}

}  // namespace

void launch_ridge(const hogwild::DeviceChunk& c, float* w) {
  // One warp (serial), else the chunk's warps (0: 1,024 of them), 8 warps a block.
  const unsigned warps = c.access == hogwild::DeviceAccess::serial ? 1 : (c.warps ? c.warps : 1024);
  const unsigned threads = warps < 8 ? 32 * warps : 256;
  const unsigned blocks = (32 * warps + threads - 1) / threads;
  ridge_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(c.stream)>>>(c, w);
}
