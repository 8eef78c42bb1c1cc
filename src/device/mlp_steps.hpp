// The MLP on a device (--model mlp --device cuda): a worker trains its chunk in
// mini-batches of --batch rows, each a short sequence of primitive operations on
// device memory (MlpPrimitives): the batch's input columns gathered, the layers'
// products (cuBLAS SGEMM on the GPU), bias and ReLU, the softmax top, the products
// of the backward pass, and each tensor's step with the mode's access. The same
// loss, gradients and update rule as MlpModel's step on the CPU:
//   - hogwild and atomic read the weights through a private copy taken at the
//     start of the mini-batch (relaxed loads: other processes write them
//     meanwhile), and step them with relaxed stores or atomicAdd;
//   - serial reads them in place; lock holds the device arena's lock around the
//     whole mini-batch;
//   - gradient (ddp) adds the mini-batch's summed gradient to the ddp buffer.
// The sequence is host logic, compiled everywhere: CUDA's primitives are kernels
// and cuBLAS (src/cuda/mlp_primitives.cpp); tests run it on host primitives against
// MlpModel's CPU step.
#pragma once

#include <cstddef>
#include <vector>

#include "hogwild/device_kernel.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/param_set.hpp"

namespace hogwild::detail {

// A dense block's step, with the mode's access: g = scale * G[i] + l2 * w[i], then
// descend (or, with gradient access, add g to grad[i]).
struct DenseDescent {
  float* w = nullptr;
  float* state = nullptr;  // AdaGrad's, or null
  float* grad = nullptr;   // gradient access: the ddp buffer
  const float* G = nullptr;
  std::size_t n = 0;
  float scale = 1, l2 = 0, lr = 0;
  bool adagrad = false;
};

// A bias's step: g_j = scale * sum over the B columns of D's row j (D: out x B).
struct BiasDescent {
  float* b = nullptr;
  float* state = nullptr;
  float* grad = nullptr;
  const float* D = nullptr;
  std::size_t out = 0, B = 0;
  float scale = 1, lr = 0;
  bool adagrad = false;
};

// What the sequence asks of a device. Matrices are column-major: a layer's
// activations or deltas are units x batch (leading dimension units), W_l (out x in,
// row-major, MlpModel's layout) is in x out. Calls are issued in order (a stream).
class MlpPrimitives {
 public:
  virtual ~MlpPrimitives() = default;
  // `floats` of scratch in the device's memory, kept as long as this object.
  virtual float* buffer(std::size_t floats) = 0;
  // C (m x n) = op(A) op(B).
  virtual void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* A,
                    std::size_t lda, const float* B, std::size_t ldb, float* C,
                    std::size_t ldc) = 0;
  // As the launch_* of the same names (kernels.hpp).
  virtual void gather(const DeviceRows& rows, const std::uint32_t* order, std::size_t begin,
                      std::size_t n, float* X) = 0;
  virtual void bias_act(DeviceAccess access, float* Z, const float* bias, std::size_t out,
                        std::size_t n, bool relu) = 0;
  virtual void softmax_top(float* Z, const float* target, const std::uint32_t* order,
                           std::size_t begin, std::size_t classes, std::size_t n,
                           double* loss) = 0;
  virtual void relu_mask(float* D, const float* A, std::size_t n) = 0;
  virtual void snapshot(DeviceAccess access, float* dst, const float* src, std::size_t n) = 0;
  virtual void dense_descent(DeviceAccess access, const DenseDescent& d) = 0;
  virtual void bias_descent(DeviceAccess access, const BiasDescent& d) = 0;
  virtual void lock(int* lock, bool acquire) = 0;
};

class MlpSteps {
 public:
  // params: the model's tensors on the device (W0, b0, W1, ...; MlpModel's); grads:
  // each tensor's ddp buffer (gradient access), else null. ops: one set of
  // primitives per stream (--device-streams): mini-batch i goes to stream i mod K,
  // each stream with scratch of its own, so the streams are Hogwild! workers of
  // their own on the shared weights.
  MlpSteps(const MlpModel& model, const ParamSet& params, const std::vector<float*>& grads,
           DeviceAccess access, bool adagrad, std::size_t batch,
           const std::vector<MlpPrimitives*>& ops);

  // Trains positions [c.begin, c.begin + c.count) of c.order in mini-batches,
  // adding their losses to c.loss_sum; issues only (the caller synchronises every
  // stream).
  void run(const DeviceChunk& c);

 private:
  struct Layer {
    float* W = nullptr;
    float* W_state = nullptr;
    float* W_grad = nullptr;
    float* b = nullptr;
    float* b_state = nullptr;
    float* b_grad = nullptr;
    std::size_t in = 0, out = 0;
  };
  // A stream's primitives and scratch.
  struct Stream {
    MlpPrimitives* ops = nullptr;
    std::vector<float*> copy;   // live modes: the mini-batch's copy of each W
    std::vector<float*> act;    // act[0]: the input columns; act[l]: layer l's output
    std::vector<float*> delta;  // delta[l]: layer l's output's delta (l < L - 1)
    float* G = nullptr;         // a layer's weight gradient
  };
  void mini_batch(Stream& s, const DeviceChunk& c, std::size_t pos, std::size_t n);

  std::vector<Layer> layers_;
  std::vector<Stream> streams_;
  DeviceAccess access_;
  bool adagrad_, live_;
  float l2_;
  std::size_t batch_;
};

}  // namespace hogwild::detail
