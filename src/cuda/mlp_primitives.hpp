// The MLP's primitives on the GPU (device/mlp_steps.hpp): cuBLAS SGEMM (fp32) on
// the worker's stream for the products, the kernels of mlp.cu for the rest, and
// scratch in cudaMalloc'd arrays.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cuda/device_array.hpp"
#include "cuda/kernels.hpp"
#include "device/mlp_steps.hpp"

typedef struct cublasContext* cublasHandle_t;

namespace hogwild::detail {

class CudaMlpPrimitives final : public MlpPrimitives {
 public:
  explicit CudaMlpPrimitives(cudaStream_t stream);
  ~CudaMlpPrimitives() override;
  CudaMlpPrimitives(const CudaMlpPrimitives&) = delete;
  CudaMlpPrimitives& operator=(const CudaMlpPrimitives&) = delete;

  float* buffer(std::size_t floats) override;
  void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* A,
            std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc) override;
  void gather(const DeviceRows& rows, const std::uint32_t* order, std::size_t begin,
              std::size_t n, float* X) override {
    launch_gather(rows, order, begin, n, X, stream_);
  }
  void bias_act(DeviceAccess access, float* Z, const float* bias, std::size_t out, std::size_t n,
                bool relu) override {
    launch_bias_act(access, Z, bias, out, n, relu, stream_);
  }
  void softmax_top(float* Z, const float* target, const std::uint32_t* order, std::size_t begin,
                   std::size_t classes, std::size_t n, double* loss) override {
    launch_softmax_top(Z, target, order, begin, classes, n, loss, stream_);
  }
  void relu_mask(float* D, const float* A, std::size_t n) override {
    launch_relu_mask(D, A, n, stream_);
  }
  void snapshot(DeviceAccess access, float* dst, const float* src, std::size_t n) override {
    launch_snapshot(access, dst, src, n, stream_);
  }
  void dense_descent(DeviceAccess access, const DenseDescent& d) override {
    launch_dense_descent(access, d, stream_);
  }
  void bias_descent(DeviceAccess access, const BiasDescent& d) override {
    launch_bias_descent(access, d, stream_);
  }
  void lock(int* lock, bool acquire) override { launch_lock(lock, acquire, stream_); }

 private:
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  std::vector<DeviceArray<float>> buffers_;
};

}  // namespace hogwild::detail
