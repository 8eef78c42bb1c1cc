// The GPU's Hogwild kernels, as the host launches them: plain structs of device
// pointers and scalars (no CUDA type, so host files include this without the
// toolkit's headers). Each kernel trains positions [begin, begin + count) of an
// epoch's order, one example (or rating) per warp, the warps being the Hogwild
// workers inside a process: they read and write the shared weights with the
// access of the mode (DeviceAccess), as the CPU's workers do.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hogwild::detail {

// hogwild: relaxed loads and stores (cuda::atomic_ref, device scope: THE
// INTENDED RACE, as on the CPU, update_policy.hpp); atomic: atomicAdd for each
// write; lock: one spin lock in device memory (the device arena's, so shared by
// every process) held by a warp around its whole example; serial: one warp.
// gradient (--mode ddp): the weights are only read, and each example's gradient
// is added (atomicAdd) to the tensors' gradient buffers (the *_grad pointers),
// which launch_apply then applies once the ranks have summed them.
enum class DeviceAccess : std::uint8_t { serial, hogwild, atomic, lock, gradient };

// Rows on the device and their targets: CSR (sparse and rating layouts: offsets
// set), dense floats (value, cols a row) or dense bytes (pixels, value = byte / 255).
struct DeviceRows {
  const std::uint64_t* offsets = nullptr;
  const std::uint32_t* index = nullptr;
  const float* value = nullptr;
  const std::uint8_t* pixels = nullptr;
  std::uint64_t cols = 0;
  const float* target = nullptr;
};

struct DeviceChunk {
  DeviceRows rows;
  const std::uint32_t* order = nullptr;  // the epoch's order of rows, on the device
  std::size_t begin = 0, count = 0;
  float lr = 0;
  DeviceAccess access = DeviceAccess::hogwild;
  bool adagrad = false;
  int* lock = nullptr;          // lock mode: a zeroed int in the device arena
  double* loss_sum = nullptr;   // the chunk's losses are added here
  void* stream = nullptr;       // a cudaStream_t
};

enum class DeviceLinearLoss : std::uint8_t { logistic, hinge, squared };

struct LinearKernelArgs {
  DeviceChunk chunk;
  float* w = nullptr;
  float* w_state = nullptr;  // AdaGrad's accumulators
  float* b = nullptr;        // the bias, or null
  float* b_state = nullptr;
  float* w_grad = nullptr;   // gradient access: the gradient buffers
  float* b_grad = nullptr;
  DeviceLinearLoss loss = DeviceLinearLoss::logistic;
  bool signed_targets = false;
  float l2 = 0;
};
void launch_linear(const LinearKernelArgs& a);

struct MfKernelArgs {
  DeviceChunk chunk;
  float* P = nullptr;
  float* Q = nullptr;
  float* P_state = nullptr;
  float* Q_state = nullptr;
  float* bu = nullptr;  // biases, or null
  float* bi = nullptr;
  float* bu_state = nullptr;
  float* bi_state = nullptr;
  float* P_grad = nullptr;  // gradient access: the gradient buffers
  float* Q_grad = nullptr;
  float* bu_grad = nullptr;
  float* bi_grad = nullptr;
  std::uint32_t rank = 0;
  float mean = 0;
  float l2 = 0;
};
void launch_mf(const MfKernelArgs& a);

// Softmax regression: W is classes rows of `stride` floats (SoftmaxModel's layout).
// At most kMaxDeviceClasses classes (a warp keeps its logits in shared memory).
inline constexpr std::uint32_t kMaxDeviceClasses = 1024;
struct SoftmaxKernelArgs {
  DeviceChunk chunk;
  float* W = nullptr;
  float* W_state = nullptr;
  float* b = nullptr;
  float* b_state = nullptr;
  float* W_grad = nullptr;  // gradient access: the gradient buffers
  float* b_grad = nullptr;
  std::uint32_t classes = 0;
  std::uint64_t stride = 0;
  float l2 = 0;
};
void launch_softmax(const SoftmaxKernelArgs& a);

// --mode ddp's update, for one tensor, once its gradient buffer holds the sum over
// the ranks: g = scale * grad[i]; SGD: w -= lr g; AdaGrad: G += g^2, w -= lr g /
// (sqrt(G) + eps), as the CPU's. The buffer is zeroed as it is read (the next
// gradient starts from nothing). One thread per coordinate: every coordinate is
// written by one thread, so plain loads and stores.
struct ApplyArgs {
  float* w = nullptr;
  float* state = nullptr;  // AdaGrad's, or null (SGD)
  float* grad = nullptr;
  std::size_t n = 0;
  float lr = 0;
  float scale = 1;
  void* stream = nullptr;
};
void launch_apply(const ApplyArgs& a);

// The bandwidth yardstick: dst[i] = src[i], n floats (bench/).
void launch_copy(float* dst, const float* src, std::size_t n, void* stream);

// Blocks and threads of a chunk's launch: serial is one warp; otherwise enough
// warps to fill the device (resident warps), each looping over examples.
struct LaunchShape {
  unsigned blocks = 1, threads = 32;
};
LaunchShape launch_shape(DeviceAccess access, std::size_t count);

}  // namespace hogwild::detail
