// Device helpers the kernels share: the mode's reads and writes of a shared float,
// warp sums, and the lock.
#pragma once

#include <cuda_fp16.h>

#include <cfloat>
#include <cuda/atomic>
#include <type_traits>

#include "cuda/kernels.hpp"

namespace hogwild::detail {

constexpr unsigned kFullWarp = 0xffffffffu;

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullWarp, x, o);
  return x;
}

// Reads and writes of the shared weights, by mode. Hogwild: THE INTENDED RACE
// (as on the CPU, update_policy.hpp): other warps, of this process and of other
// processes on the same device, read and write these floats meanwhile; relaxed
// device-scope atomic_ref makes each load and store whole and well-defined (it
// compiles to plain ld/st) while a concurrent update may be lost, which Hogwild!
// tolerates. Atomic: one atomicAdd per write, nothing lost, and relaxed loads
// beside them. Lock and serial: one writer at a time, plain loads. Gradient: no
// one writes the weights during the launch, plain loads.
template <DeviceAccess A>
__device__ inline float load(float* p) {
  if constexpr (A == DeviceAccess::hogwild || A == DeviceAccess::atomic)
    return cuda::atomic_ref<float, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
  else
    return *p;
}

template <DeviceAccess A>
__device__ inline void add(float* p, float delta) {
  if constexpr (A == DeviceAccess::atomic) {
    atomicAdd(p, delta);
  } else if constexpr (A == DeviceAccess::hogwild) {
    cuda::atomic_ref<float, cuda::thread_scope_device> r(*p);
    r.store(r.load(cuda::memory_order_relaxed) + delta, cuda::memory_order_relaxed);
  } else {
    *p += delta;
  }
}

// The same for a weight stored as a half (--factors fp16): read as a float, the
// sum computed in fp32 and rounded to the nearest half when stored. Hogwild: a
// relaxed 16-bit load and store of the half's bits (the same intended race: a
// concurrent update may be lost, never torn); atomic: the half atomicAdd of sm_70
// and later (the delta rounded to a half first).
template <DeviceAccess A>
__device__ inline float load(__half* p) {
  if constexpr (A == DeviceAccess::hogwild || A == DeviceAccess::atomic)
    return __half2float(__ushort_as_half(
        cuda::atomic_ref<unsigned short, cuda::thread_scope_device>(
            *reinterpret_cast<unsigned short*>(p))
            .load(cuda::memory_order_relaxed)));
  else
    return __half2float(*p);
}

template <DeviceAccess A>
__device__ inline void add(__half* p, float delta) {
  if constexpr (A == DeviceAccess::atomic) {
    atomicAdd(p, __float2half_rn(delta));
  } else if constexpr (A == DeviceAccess::hogwild) {
    cuda::atomic_ref<unsigned short, cuda::thread_scope_device> r(
        *reinterpret_cast<unsigned short*>(p));
    const float w = __half2float(__ushort_as_half(r.load(cuda::memory_order_relaxed)));
    r.store(__half_as_ushort(__float2half_rn(w + delta)), cuda::memory_order_relaxed);
  } else {
    *p = __float2half_rn(__half2float(*p) + delta);
  }
}

// SGD: w -= lr g. AdaGrad: G += g^2; w -= lr g / (sqrt(G) + eps), as the CPU's.
// Gradient access: g is added to the weight's gradient buffer `grad` instead (the
// weights and G are left alone; launch_apply steps once the ranks summed it).
// W: float, or __half for a weight stored as a half (G and the buffer are floats).
template <DeviceAccess A, class W>
__device__ inline void descend(W* w, float* state, float* grad, bool adagrad, float g,
                               float lr) {
  if constexpr (A == DeviceAccess::gradient) {
    atomicAdd(grad, g);
    return;
  }
  if (!adagrad) return add<A>(w, -lr * g);
  add<A>(state, g * g);
  add<A>(w, -lr * g / (sqrtf(load<A>(state)) + 1e-7f));
}

// Hogwild's step of a weight from the value `seen` this lane read of it earlier:
// SGD or AdaGrad as descend's, the weight stored as seen stepped, not read again
// (the kernels' "once": one round trip to L2 a weight instead of two; relaxed
// device-scope loads are not cached in L1). THE INTENDED RACE, as add's: an update
// another warp made since the read is lost. (MF's kernel does not take it: there,
// on an H200, it cost test RMSE for no speed: docs/GPU.md.)
__device__ inline void step_from(float* w, float seen, float* state, bool adagrad, float g,
                                 float lr) {
  if (g == 0) return;  // nothing to add: storing `seen` would undo other warps' updates
  float step = lr * g;
  if (adagrad) {
    add<DeviceAccess::hogwild>(state, g * g);
    step /= sqrtf(load<DeviceAccess::hogwild>(state)) + 1e-7f;
  }
  cuda::atomic_ref<float, cuda::thread_scope_device>(*w).store(seen - step,
                                                                cuda::memory_order_relaxed);
}

// Slot t of a lane's few kept values, in registers (every index a constant once
// unrolled: a runtime index would put the array in local memory).
template <unsigned N>
__device__ inline void keep(float (&k)[N], unsigned t, float v) {
#pragma unroll
  for (unsigned i = 0; i < N; ++i)
    if (t == i) k[i] = v;
}

template <unsigned N>
__device__ inline float kept_at(const float (&k)[N], unsigned t) {
  float v = 0;
#pragma unroll
  for (unsigned i = 0; i < N; ++i)
    if (t == i) v = k[i];
  return v;
}

// Lock mode: lane 0 takes the lock for its warp (acquire) and gives it back
// (release); the warp's lanes meet before and after.
__device__ inline void lock_warp(int* lock) {
  if ((threadIdx.x & 31) == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_device> l(*lock);
    int expected = 0;
    while (!l.compare_exchange_weak(expected, 1, cuda::memory_order_acquire,
                                    cuda::memory_order_relaxed)) {
      expected = 0;
      __nanosleep(64);
    }
  }
  __syncwarp();
}

__device__ inline void unlock_warp(int* lock) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0)
    cuda::atomic_ref<int, cuda::thread_scope_device>(*lock).store(0, cuda::memory_order_release);
}

// f(column, value) for each stored entry of row r, the warp's lanes taking turns:
// a CSR row's non-zeros (consecutive lanes on consecutive entries), or every column
// of a dense row.
template <class F>
__device__ inline void row_each(const DeviceRows& d, std::uint32_t r, unsigned lane, F&& f) {
  if (d.offsets) {
    for (std::uint64_t k = d.offsets[r] + lane; k < d.offsets[r + 1]; k += 32)
      f(d.index[k], d.value[k]);
  } else if (d.pixels) {
    const std::uint8_t* x = d.pixels + r * d.cols;
    for (std::uint64_t j = lane; j < d.cols; j += 32) f(j, static_cast<float>(x[j]) / 255.0f);
  } else {
    const float* x = d.value + r * d.cols;
    for (std::uint64_t j = lane; j < d.cols; j += 32) f(j, x[j]);
  }
}

__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, o));
  return x;
}

// The warp's softmax of z[0, K) (every lane calls it): z becomes p - onehot(y);
// returns the cross-entropy log(sum exp(z - m)) - (z_y - m), m the largest logit
// (finite where exp(z_y - m) underflows), as the CPU's SoftmaxModel and MlpModel.
__device__ inline float softmax_delta(float* z, std::size_t K, std::size_t y, unsigned lane) {
  float m = -FLT_MAX;
  for (std::size_t k = lane; k < K; k += 32) m = fmaxf(m, z[k]);
  m = warp_max(m);
  float sum = 0;
  for (std::size_t k = lane; k < K; k += 32) sum += expf(z[k] - m);
  sum = warp_sum(sum);
  const float zy = z[y] - m;
  __syncwarp();
  for (std::size_t k = lane; k < K; k += 32) z[k] = expf(z[k] - m) / sum - (k == y ? 1.f : 0.f);
  __syncwarp();
  return logf(sum) - zy;
}

// Calls f(std::integral_constant<DeviceAccess, a>{}): a kernel template's launch
// for the access known at run time.
template <class F>
inline void with_access(DeviceAccess a, F&& f) {
  switch (a) {
    case DeviceAccess::serial: return f(std::integral_constant<DeviceAccess, DeviceAccess::serial>{});
    case DeviceAccess::hogwild: return f(std::integral_constant<DeviceAccess, DeviceAccess::hogwild>{});
    case DeviceAccess::atomic: return f(std::integral_constant<DeviceAccess, DeviceAccess::atomic>{});
    case DeviceAccess::lock: return f(std::integral_constant<DeviceAccess, DeviceAccess::lock>{});
    case DeviceAccess::gradient:
      return f(std::integral_constant<DeviceAccess, DeviceAccess::gradient>{});
  }
}

// A grid-stride loop over [0, n), a thread per index.
#define HOGWILD_EACH(i, n)                                                               \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n);     \
       i += gridDim.x * std::size_t{blockDim.x})

// Blocks of `threads` for a thread per index of n (at least 1, at most 65,536: the
// loop above covers the rest).
inline unsigned blocks_for(std::size_t n, unsigned threads = 256) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65536 ? (b ? b : 1) : 65536);
}

// The grid-stride loop's start and step, in warps.
__device__ inline std::size_t warp_id() { return (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) >> 5; }
__device__ inline std::size_t warp_count() { return (gridDim.x * std::size_t{blockDim.x}) >> 5; }

}  // namespace hogwild::detail
