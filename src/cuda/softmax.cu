// Softmax regression on the GPU: a warp per example over its non-zeros or columns,
// the logits in the warp's slice of shared memory, and SoftmaxModel's loss
// (-log p[target], from the max-shifted sums) and gradient ((p - onehot) x, plus
// l2 w on the coordinates the row touches: all of them for dense rows, as the CPU's).
#include <cfloat>

#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

template <DeviceAccess A>
__global__ void softmax_kernel(SoftmaxKernelArgs a) {
  extern __shared__ float logits[];
  const DeviceChunk& c = a.chunk;
  const unsigned lane = threadIdx.x & 31;
  const std::uint32_t K = a.classes;
  float* z = logits + (threadIdx.x >> 5) * K;
  double losses = 0;
  for (std::size_t i = c.begin + warp_id(); i < c.begin + c.count; i += warp_count()) {
    const std::uint32_t r = c.order[i];
    const auto y = static_cast<std::uint32_t>(c.rows.target[r]);
    if constexpr (A == DeviceAccess::lock) lock_warp(c.lock);
    for (std::uint32_t k = 0; k < K; ++k) {
      float* w = a.W + k * a.stride;
      float s = 0;
      row_each(c.rows, r, lane, [&](std::uint64_t j, float x) { s += load<A>(w + j) * x; });
      s = warp_sum(s);
      if (lane == 0) z[k] = s + (a.b ? load<A>(a.b + k) : 0.f);
    }
    __syncwarp();
    const float loss = softmax_delta(z, K, y, lane);
    for (std::uint32_t k = 0; k < K; ++k) {
      float* w = a.W + k * a.stride;
      float* state = a.W_state ? a.W_state + k * a.stride : nullptr;
      float* grad = a.W_grad ? a.W_grad + k * a.stride : nullptr;
      const float g = z[k];
      row_each(c.rows, r, lane, [&](std::uint64_t j, float x) {
        descend<A>(w + j, state ? state + j : nullptr, grad ? grad + j : nullptr, c.adagrad,
                   g * x + (a.l2 != 0 ? a.l2 * load<A>(w + j) : 0.f), c.lr);
      });
    }
    if (a.b)
      for (std::uint32_t k = lane; k < K; k += 32)
        descend<A>(a.b + k, a.b_state ? a.b_state + k : nullptr, a.b_grad ? a.b_grad + k : nullptr,
                   c.adagrad, z[k], c.lr);
    __syncwarp();  // z is the next example's
    if constexpr (A == DeviceAccess::lock) unlock_warp(c.lock);
    losses += loss;
  }
  if (lane == 0 && losses != 0) atomicAdd(c.loss_sum, losses);
}

}  // namespace

void launch_softmax(const SoftmaxKernelArgs& a) {
  const LaunchShape s = launch_shape(a.chunk);
  auto* stream = static_cast<cudaStream_t>(a.chunk.stream);
  const std::size_t shared = (s.threads / 32) * a.classes * sizeof(float);
  with_access(a.chunk.access, [&](auto access) {
    if (shared > 48 * 1024)
      cudaFuncSetAttribute(softmax_kernel<access.value>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    softmax_kernel<access.value><<<s.blocks, s.threads, shared, stream>>>(a);
  });
}

}  // namespace hogwild::detail
