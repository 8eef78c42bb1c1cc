// The GPU's Hogwild kernels, as the host launches them: plain structs of device
// pointers and scalars (no CUDA type, so host files include this without the
// toolkit's headers). Each kernel trains positions [begin, begin + count) of an
// epoch's order, one example (or rating) per warp, the warps being the Hogwild
// workers inside a process: they read and write the shared weights with the
// access of the mode (DeviceAccess), as the CPU's workers do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/mlp_steps.hpp"  // DenseDescent, BiasDescent
#include "hogwild/device_kernel.hpp"

namespace hogwild::detail {

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

// P and Q hold floats, or halves where `half` (--factors fp16); the biases, AdaGrad's
// state and the gradient buffers are floats.
struct MfKernelArgs {
  DeviceChunk chunk;
  void* P = nullptr;
  void* Q = nullptr;
  bool half = false;
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

// The MLP's pieces between its products (cuBLAS's; device/mlp_steps.cpp). Matrices
// are column-major: a layer's activations or deltas are units x batch (leading
// dimension units), W_l (out x in, row-major, MlpModel's layout) is in x out.
//
// X (d x B): the input columns of positions [begin, begin + B) of the order: a
// sparse row's non-zeros, a dense row, or bytes / 255.
void launch_gather(const DeviceRows& rows, const std::uint32_t* order, std::size_t begin,
                   std::size_t B, float* X, void* stream);
// Z (out x B) += bias (read with the mode's access; null: none), then ReLU if relu.
void launch_bias_act(DeviceAccess access, float* Z, const float* bias, std::size_t out,
                     std::size_t B, bool relu, void* stream);
// The top layer: Z (classes x B) logits become dloss/dlogits (p - onehot), each
// column's cross-entropy added to *loss (targets of the order's rows, as classes).
void launch_softmax_top(float* Z, const float* target, const std::uint32_t* order,
                        std::size_t begin, std::size_t classes, std::size_t B, double* loss,
                        void* stream);
// D[i] = A[i] > 0 ? D[i] : 0 (the ReLU's derivative), n entries.
void launch_relu_mask(float* D, const float* A, std::size_t n, void* stream);
// dst[i] = src[i], read with the mode's access (a private copy of live weights).
void launch_snapshot(DeviceAccess access, float* dst, const float* src, std::size_t n,
                     void* stream);
// A dense block's step, with the mode's access (DenseDescent, device/mlp_steps.hpp).
void launch_dense_descent(DeviceAccess access, const DenseDescent& d, void* stream);
// A bias's step (BiasDescent, device/mlp_steps.hpp).
void launch_bias_descent(DeviceAccess access, const BiasDescent& d, void* stream);
// Lock mode around a whole mini-batch's launches: a one-thread kernel that spins
// until it holds the device arena's lock (acquire), or gives it back (release).
void launch_lock(int* lock, bool acquire, void* stream);

// --mode ddp's update, for one tensor, once its gradient buffer holds the sum over
// the ranks: g = scale * grad[i]; SGD: w -= lr g; AdaGrad: G += g^2, w -= lr g /
// (sqrt(G) + eps), as the CPU's. The buffer is zeroed as it is read (the next
// gradient starts from nothing). One thread per coordinate: every coordinate is
// written by one thread, so plain loads and stores.
struct ApplyArgs {
  void* w = nullptr;
  bool half = false;       // w holds halves (MF's factors under --factors fp16), else floats
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

// Blocks and threads of a chunk's launch: serial is one warp; the gradient access
// (ddp: the weights are only read) as many warps as the device holds resident;
// otherwise chunk.warps (at most the resident ones), each looping over examples.
struct LaunchShape {
  unsigned blocks = 1, threads = 32;
};
LaunchShape launch_shape(const DeviceChunk& chunk);

// bench_gpu's comparison: whether hogwild's linear kernel reads each weight again
// just before its store (true: the kernel before 2026-11-27) or stores the value it
// read for the margin, stepped (false, the default). Not for the trainer: one
// process-wide switch.
void set_hogwild_reread(bool on);
bool hogwild_reread();

}  // namespace hogwild::detail
