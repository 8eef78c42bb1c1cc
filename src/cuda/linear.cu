// Linear models on the GPU (logistic, hinge, squared): a warp per example, its
// lanes over the row's non-zeros or columns (coalesced: consecutive lanes read
// consecutive entries), the margin summed by warp shuffles.
// The same loss and slope (models/linear_loss.hpp), lazy L2 and optimiser steps as
// the CPU's LinearModel.
#include "cuda/warp.cuh"
#include "models/linear_loss.hpp"

namespace hogwild::detail {

namespace {

template <DeviceAccess A>
__global__ void linear_kernel(LinearKernelArgs a) {
  const DeviceChunk& c = a.chunk;
  const unsigned lane = threadIdx.x & 31;
  double losses = 0;
  for (std::size_t i = c.begin + warp_id(); i < c.begin + c.count; i += warp_count()) {
    const std::uint32_t r = c.order[i];
    if constexpr (A == DeviceAccess::lock) lock_warp(c.lock);
    float z = 0;
    row_each(c.rows, r, lane, [&](std::uint64_t j, float x) { z += load<A>(a.w + j) * x; });
    z = warp_sum(z);
    if (a.b) z += load<A>(a.b);
    float loss, slope;
    linear_loss_and_slope(static_cast<std::uint8_t>(a.loss), a.signed_targets, z, c.rows.target[r],
                          loss, slope);
    row_each(c.rows, r, lane, [&](std::uint64_t j, float x) {
      float* w = a.w + j;
      const float g = slope * x + (a.l2 != 0 ? a.l2 * load<A>(w) : 0.f);
      descend<A>(w, a.w_state ? a.w_state + j : nullptr, a.w_grad ? a.w_grad + j : nullptr,
                 c.adagrad, g, c.lr);
    });
    if (a.b && lane == 0) descend<A>(a.b, a.b_state, a.b_grad, c.adagrad, slope, c.lr);
    if constexpr (A == DeviceAccess::lock) unlock_warp(c.lock);
    losses += loss;
  }
  if (lane == 0 && losses != 0) atomicAdd(c.loss_sum, losses);
}

}  // namespace

void launch_linear(const LinearKernelArgs& a) {
  const LaunchShape s = launch_shape(a.chunk);
  auto* stream = static_cast<cudaStream_t>(a.chunk.stream);
  with_access(a.chunk.access, [&](auto access) {
    linear_kernel<access.value><<<s.blocks, s.threads, 0, stream>>>(a);
  });
}

}  // namespace hogwild::detail
