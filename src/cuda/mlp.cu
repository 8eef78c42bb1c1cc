// The MLP's kernels between its products (kernels.hpp): the input columns, bias
// and ReLU, the softmax top, the ReLU mask, private copies of live weights, and
// the steps on a dense block and on a bias with the mode's access (hogwild's
// relaxed loads and stores: THE INTENDED RACE, as the linear kernels').
#include <cfloat>

#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

constexpr unsigned kThreads = 256;  // blocks_for's

// A block per column: zeroed, then the row's entries.
__global__ void gather_kernel(DeviceRows rows, const std::uint32_t* order, std::size_t begin,
                              float* X) {
  const std::uint32_t r = order[begin + blockIdx.x];
  const std::uint64_t d = rows.cols;
  float* x = X + blockIdx.x * d;
  if (rows.offsets) {
    for (std::uint64_t j = threadIdx.x; j < d; j += blockDim.x) x[j] = 0;
    __syncthreads();
    for (std::uint64_t k = rows.offsets[r] + threadIdx.x; k < rows.offsets[r + 1]; k += blockDim.x)
      x[rows.index[k]] = rows.value[k];
  } else if (rows.pixels) {
    const std::uint8_t* p = rows.pixels + r * d;
    for (std::uint64_t j = threadIdx.x; j < d; j += blockDim.x)
      x[j] = static_cast<float>(p[j]) / 255.0f;
  } else {
    const float* v = rows.value + r * d;
    for (std::uint64_t j = threadIdx.x; j < d; j += blockDim.x) x[j] = v[j];
  }
}

template <DeviceAccess A>
__global__ void bias_act_kernel(float* Z, const float* bias, std::size_t out, std::size_t n,
                                bool relu) {
  HOGWILD_EACH(i, n) {
    float z = Z[i];
    if (bias) z += load<A>(const_cast<float*>(bias) + i % out);
    Z[i] = relu ? fmaxf(z, 0.f) : z;
  }
}

// A warp per column, as MlpModel::softmax_columns: max-shifted, the loss
// log(sum) - (z_y - m).
__global__ void softmax_top_kernel(float* Z, const float* target, const std::uint32_t* order,
                                   std::size_t begin, std::size_t K, std::size_t B,
                                   double* loss) {
  const unsigned lane = threadIdx.x & 31;
  double losses = 0;
  for (std::size_t b = warp_id(); b < B; b += warp_count()) {
    losses += softmax_delta(Z + b * K, K, static_cast<std::size_t>(target[order[begin + b]]),
                            lane);
  }
  if (lane == 0 && losses != 0) atomicAdd(loss, losses);
}

__global__ void relu_mask_kernel(float* D, const float* A, std::size_t n) {
  HOGWILD_EACH(i, n) D[i] = A[i] > 0 ? D[i] : 0.f;
}

template <DeviceAccess A>
__global__ void snapshot_kernel(float* dst, const float* src, std::size_t n) {
  HOGWILD_EACH(i, n) dst[i] = load<A>(const_cast<float*>(src) + i);
}

template <DeviceAccess A>
__global__ void dense_descent_kernel(DenseDescent d) {
  HOGWILD_EACH(i, d.n) {
    const float g = d.scale * d.G[i] + (d.l2 != 0 ? d.l2 * load<A>(d.w + i) : 0.f);
    descend<A>(d.w + i, d.state ? d.state + i : nullptr, d.grad ? d.grad + i : nullptr,
               d.adagrad, g, d.lr);
  }
}

template <DeviceAccess A>
__global__ void bias_descent_kernel(BiasDescent d) {
  HOGWILD_EACH(j, d.out) {
    float s = 0;
    for (std::size_t b = 0; b < d.B; ++b) s += d.D[j + b * d.out];
    descend<A>(d.b + j, d.state ? d.state + j : nullptr, d.grad ? d.grad + j : nullptr,
               d.adagrad, d.scale * s, d.lr);
  }
}

__global__ void lock_kernel(int* lock, bool acquire) {
  cuda::atomic_ref<int, cuda::thread_scope_device> l(*lock);
  if (!acquire) {
    l.store(0, cuda::memory_order_release);
    return;
  }
  int expected = 0;
  while (!l.compare_exchange_weak(expected, 1, cuda::memory_order_acquire,
                                  cuda::memory_order_relaxed)) {
    expected = 0;
    __nanosleep(256);
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

void launch_gather(const DeviceRows& rows, const std::uint32_t* order, std::size_t begin,
                   std::size_t B, float* X, void* stream) {
  if (B) gather_kernel<<<static_cast<unsigned>(B), kThreads, 0, as_stream(stream)>>>(rows, order, begin, X);
}

void launch_bias_act(DeviceAccess access, float* Z, const float* bias, std::size_t out,
                     std::size_t B, bool relu, void* stream) {
  const std::size_t n = out * B;
  with_access(access, [&](auto a) {
    bias_act_kernel<a.value><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(Z, bias, out, n,
                                                                                relu);
  });
}

void launch_softmax_top(float* Z, const float* target, const std::uint32_t* order,
                        std::size_t begin, std::size_t classes, std::size_t B, double* loss,
                        void* stream) {
  softmax_top_kernel<<<blocks_for(B * 32), kThreads, 0, as_stream(stream)>>>(Z, target, order,
                                                                            begin, classes, B, loss);
}

void launch_relu_mask(float* D, const float* A, std::size_t n, void* stream) {
  relu_mask_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(D, A, n);
}

void launch_snapshot(DeviceAccess access, float* dst, const float* src, std::size_t n,
                     void* stream) {
  with_access(access, [&](auto a) {
    snapshot_kernel<a.value><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dst, src, n);
  });
}

void launch_dense_descent(DeviceAccess access, const DenseDescent& d, void* stream) {
  with_access(access, [&](auto a) {
    dense_descent_kernel<a.value><<<blocks_for(d.n), kThreads, 0, as_stream(stream)>>>(d);
  });
}

void launch_bias_descent(DeviceAccess access, const BiasDescent& d, void* stream) {
  with_access(access, [&](auto a) {
    bias_descent_kernel<a.value><<<blocks_for(d.out), kThreads, 0, as_stream(stream)>>>(d);
  });
}

void launch_lock(int* lock, bool acquire, void* stream) {
  lock_kernel<<<1, 1, 0, as_stream(stream)>>>(lock, acquire);
}

}  // namespace hogwild::detail
