// --mode ddp's update on the GPU (kernels.hpp's launch_apply): once the ranks have
// summed their gradients, every rank applies the same step to its own weights, a
// thread per coordinate, and zeroes the buffer for the next mini-batch.
#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

__global__ void apply_kernel(ApplyArgs a) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < a.n;
       i += gridDim.x * std::size_t{blockDim.x}) {
    const float g = a.scale * a.grad[i];
    a.grad[i] = 0;
    if (!a.state) {
      a.w[i] -= a.lr * g;
    } else {
      const float G = a.state[i] + g * g;
      a.state[i] = G;
      a.w[i] -= a.lr * g / (sqrtf(G) + 1e-7f);
    }
  }
}

}  // namespace

void launch_apply(const ApplyArgs& a) {
  if (a.n == 0) return;
  constexpr unsigned kThreads = 256;
  const std::size_t blocks = std::min<std::size_t>((a.n + kThreads - 1) / kThreads, 65536);
  apply_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                 static_cast<cudaStream_t>(a.stream)>>>(a);
}

}  // namespace hogwild::detail
