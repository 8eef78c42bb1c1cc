// Linear models on the GPU (logistic, hinge, squared): a warp per example, its
// lanes over the row's non-zeros or columns (coalesced: consecutive lanes read
// consecutive entries), the margin summed by warp shuffles.
// The same loss and slope (models/linear_loss.hpp), lazy L2 and optimiser steps as
// the CPU's LinearModel.
#include "cuda/warp.cuh"
#include "models/linear_loss.hpp"

namespace hogwild::detail {

namespace {

// How many of its weights a lane keeps from the margin's reads for its stores (a row
// of up to 32 x kKept non-zeros; the rest are read again).
constexpr unsigned kKept = 4;

// Once: hogwild's stores write back the value the lane read for the margin, stepped
// (one round trip to L2 a weight instead of two: relaxed device-scope loads are
// not cached in L1, and a store that waits on a second load holds the warp up).
// A concurrent update between the two is lost either way (THE INTENDED RACE); the
// window is this warp's loss and slope. Otherwise each weight is read again just
// before its store (the kernel before 2026-11-27; bench_gpu compares the two, and
// on an H200 once ran 1.28x the updates/s at an equal or lower loss: docs/GPU.md).
template <DeviceAccess A, bool Once>
__global__ void linear_kernel(LinearKernelArgs a) {
  const DeviceChunk& c = a.chunk;
  const unsigned lane = threadIdx.x & 31;
  double losses = 0;
  for (std::size_t i = c.begin + warp_id(); i < c.begin + c.count; i += warp_count()) {
    const std::uint32_t r = c.order[i];
    if constexpr (A == DeviceAccess::lock) lock_warp(c.lock);
    float z = 0;
    float kept[kKept];
    unsigned t = 0;
    row_each(c.rows, r, lane, [&](std::uint64_t j, float x) {
      const float v = load<A>(a.w + j);
      if constexpr (Once) keep(kept, t++, v);
      z += v * x;
    });
    z = warp_sum(z);
    const float b_seen = a.b ? load<A>(a.b) : 0.f;
    z += b_seen;
    float loss, slope;
    linear_loss_and_slope(static_cast<std::uint8_t>(a.loss), a.signed_targets, z, c.rows.target[r],
                          loss, slope);
    t = 0;
    row_each(c.rows, r, lane, [&](std::uint64_t j, float x) {
      float* w = a.w + j;
      float* state = a.w_state ? a.w_state + j : nullptr;
      float* grad = a.w_grad ? a.w_grad + j : nullptr;
      if constexpr (Once) {
        if (t < kKept) {
          const float seen = kept_at(kept, t++);
          step_from(w, seen, state, c.adagrad, slope * x + a.l2 * seen, c.lr);
          return;
        }
      }
      const float g = slope * x + (a.l2 != 0 ? a.l2 * load<A>(w) : 0.f);
      descend<A>(w, state, grad, c.adagrad, g, c.lr);
    });
    if (a.b && lane == 0) {
      if constexpr (Once)
        step_from(a.b, b_seen, a.b_state, c.adagrad, slope, c.lr);
      else
        descend<A>(a.b, a.b_state, a.b_grad, c.adagrad, slope, c.lr);
    }
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
    if constexpr (access.value == DeviceAccess::hogwild) {
      if (!hogwild_reread()) {
        linear_kernel<access.value, true><<<s.blocks, s.threads, 0, stream>>>(a);
        return;
      }
    }
    linear_kernel<access.value, false><<<s.blocks, s.threads, 0, stream>>>(a);
  });
}


}  // namespace hogwild::detail
