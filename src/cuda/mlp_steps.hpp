// The MLP on the GPU (--model mlp --device cuda): a worker trains its chunk in
// mini-batches of --batch rows, each a few launches on the worker's stream: the
// batch's input columns gathered, the layers' products by cuBLAS (SGEMM, fp32),
// bias and ReLU, the softmax top, the products of the backward pass, and each
// tensor's step with the mode's access (kernels.hpp). The same loss, gradients and
// update rule as MlpModel's step on the CPU:
//   - hogwild and atomic read the weights through a private copy taken at the
//     start of the mini-batch (relaxed loads: other processes write them
//     meanwhile), and step them with relaxed stores or atomicAdd;
//   - serial reads them in place; lock holds the device arena's lock around the
//     whole mini-batch (a one-thread kernel spins for it on the stream);
//   - gradient (ddp) adds the mini-batch's summed gradient to the ddp buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "cuda/device_array.hpp"
#include "cuda/kernels.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/param_set.hpp"

typedef struct cublasContext* cublasHandle_t;

namespace hogwild::detail {

class MlpDeviceSteps {
 public:
  // params: the model's tensors on this device (W0, b0, W1, ...; MlpModel's); grads:
  // each tensor's ddp buffer (gradient access), else null.
  MlpDeviceSteps(const MlpModel& model, const ParamSet& params, std::vector<float*> grads,
                 DeviceAccess access, bool adagrad, std::size_t batch, cudaStream_t stream);
  ~MlpDeviceSteps();
  MlpDeviceSteps(const MlpDeviceSteps&) = delete;
  MlpDeviceSteps& operator=(const MlpDeviceSteps&) = delete;

  // Trains positions [c.begin, c.begin + c.count) of c.order in mini-batches,
  // adding their losses to c.loss_sum; launches only (the caller synchronises).
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
    DeviceArray<float> copy;  // live modes: the mini-batch's copy of W
  };
  // C (m x n) = op(A) op(B), column-major.
  void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* A,
            std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc);
  void mini_batch(const DeviceChunk& c, std::size_t pos, std::size_t n);

  std::vector<Layer> layers_;
  DeviceAccess access_;
  bool adagrad_, live_;
  float l2_;
  std::size_t batch_;
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  std::vector<DeviceArray<float>> act_;    // act_[0]: the input columns; act_[l]: layer l's output
  std::vector<DeviceArray<float>> delta_;  // delta_[l]: layer l's output's delta (l < L - 1)
  DeviceArray<float> G_;                   // a layer's weight gradient
};

}  // namespace hogwild::detail
