// --mode ddp's update on the GPU (kernels.hpp's launch_apply): once the ranks have
// summed their gradients, every rank applies the same step to its own weights, a
// thread per coordinate (the one writer: serial access), and zeroes the buffer for
// the next mini-batch.
#include "cuda/warp.cuh"

namespace hogwild::detail {

namespace {

template <class W>
__global__ void apply_kernel(ApplyArgs a) {
  HOGWILD_EACH(i, a.n) {
    const float g = a.scale * a.grad[i];
    a.grad[i] = 0;
    descend<DeviceAccess::serial>(static_cast<W*>(a.w) + i, a.state ? a.state + i : nullptr,
                                  nullptr, a.state != nullptr, g, a.lr);
  }
}

}  // namespace

void launch_apply(const ApplyArgs& a) {
  if (a.n == 0) return;
  auto* stream = static_cast<cudaStream_t>(a.stream);
  if (a.half)
    apply_kernel<__half><<<blocks_for(a.n), 256, 0, stream>>>(a);
  else
    apply_kernel<float><<<blocks_for(a.n), 256, 0, stream>>>(a);
}

}  // namespace hogwild::detail
