// Matrix factorisation on the GPU: a warp per rating (cuMF_SGD's layout: the
// factor rows P[u] and Q[i] are contiguous, the lanes over their k entries), the
// same error, L2 and optimiser steps as the CPU's MfModel (one rating a step).
// The factors are floats, or halves under --factors fp16 (cuMF_SGD's storage: a
// rating's factor rows move half the bytes), computed in fp32 either way.
#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

// MfModel::kMaxRank (1024) over a warp's 32 lanes.
constexpr std::uint32_t kMaxPerLane = 32;

// PerLane: the factors a lane holds, at least rank / 32 (1 up to rank 32, ..., 32 up
// to 1024). Loops of a constant count index p and q with constants once unrolled,
// so they live in registers; indexed by a run-time count (an array of
// kMaxPerLane) they lived in local memory (ld.local/st.local in the PTX).
template <DeviceAccess A, class T, std::uint32_t PerLane>
__global__ void mf_kernel(MfKernelArgs a) {
  const DeviceChunk& c = a.chunk;
  const unsigned lane = threadIdx.x & 31;
  const std::uint32_t k = a.rank;
  double losses = 0;
  for (std::size_t n = c.begin + warp_id(); n < c.begin + c.count; n += warp_count()) {
    const std::uint32_t r = c.order[n];
    const std::uint64_t at = c.rows.offsets[r];
    const std::size_t u = c.rows.index[at], i = c.rows.index[at + 1];
    T* pu = static_cast<T*>(a.P) + u * k;
    T* qi = static_cast<T*>(a.Q) + i * k;
    if constexpr (A == DeviceAccess::lock) lock_warp(c.lock);
    // The factors as read once (a lane's share: at most kMaxRank / 32 entries), as
    // the CPU's step reads them: the error and every gradient come from this read.
    float p[PerLane], q[PerLane];
    float z = 0;
#pragma unroll
    for (std::uint32_t m = 0; m < PerLane; ++m) {
      const std::uint32_t j = lane + 32 * m;
      p[m] = j < k ? load<A>(pu + j) : 0.f;
      q[m] = j < k ? load<A>(qi + j) : 0.f;
      z += p[m] * q[m];
    }
    z = warp_sum(z) + a.mean;
    if (a.bu) z += load<A>(a.bu + u) + load<A>(a.bi + i);
    const float e = z - c.rows.target[r];
#pragma unroll
    for (std::uint32_t m = 0; m < PerLane; ++m) {
      const std::uint32_t j = lane + 32 * m;
      if (j >= k) break;
      descend<A>(pu + j, a.P_state ? a.P_state + u * k + j : nullptr,
                 a.P_grad ? a.P_grad + u * k + j : nullptr, c.adagrad, e * q[m] + a.l2 * p[m],
                 c.lr);
      descend<A>(qi + j, a.Q_state ? a.Q_state + i * k + j : nullptr,
                 a.Q_grad ? a.Q_grad + i * k + j : nullptr, c.adagrad, e * p[m] + a.l2 * q[m],
                 c.lr);
    }
    if (a.bu && lane == 0) {
      descend<A>(a.bu + u, a.bu_state ? a.bu_state + u : nullptr,
                 a.bu_grad ? a.bu_grad + u : nullptr, c.adagrad, e, c.lr);
      descend<A>(a.bi + i, a.bi_state ? a.bi_state + i : nullptr,
                 a.bi_grad ? a.bi_grad + i : nullptr, c.adagrad, e, c.lr);
    }
    if constexpr (A == DeviceAccess::lock) unlock_warp(c.lock);
    losses += 0.5 * static_cast<double>(e) * e;
  }
  if (lane == 0 && losses != 0) atomicAdd(c.loss_sum, losses);
}

}  // namespace

void launch_mf(const MfKernelArgs& a) {
  const LaunchShape s = launch_shape(a.chunk);
  auto* stream = static_cast<cudaStream_t>(a.chunk.stream);
  with_access(a.chunk.access, [&](auto access) {
    const auto launch = [&](auto per_lane) {
      constexpr std::uint32_t n = decltype(per_lane)::value;
      if (a.half)
        mf_kernel<access.value, __half, n><<<s.blocks, s.threads, 0, stream>>>(a);
      else
        mf_kernel<access.value, float, n><<<s.blocks, s.threads, 0, stream>>>(a);
    };
    // Ranks up to 32, 64, 128, 256 and 1024 (MfModel's largest).
    const std::uint32_t need = (a.rank + 31) / 32;
    if (need <= 1) return launch(std::integral_constant<std::uint32_t, 1>{});
    if (need <= 2) return launch(std::integral_constant<std::uint32_t, 2>{});
    if (need <= 4) return launch(std::integral_constant<std::uint32_t, 4>{});
    if (need <= 8) return launch(std::integral_constant<std::uint32_t, 8>{});
    launch(std::integral_constant<std::uint32_t, kMaxPerLane>{});
  });
}

}  // namespace hogwild::detail
