#include "cuda/mlp_primitives.hpp"

#include "cuda/cublas.hpp"

namespace hogwild::detail {

CudaMlpPrimitives::CudaMlpPrimitives(cudaStream_t stream) : stream_(stream) {
  const Cublas& api = cublas();
  HOGWILD_CUBLAS(api.create(&handle_));
  HOGWILD_CUBLAS(api.set_stream(handle_, stream_));
}

CudaMlpPrimitives::~CudaMlpPrimitives() {
  if (handle_) cublas().destroy(handle_);
}

float* CudaMlpPrimitives::buffer(std::size_t floats) {
  return buffers_.emplace_back(floats).get();
}

void CudaMlpPrimitives::gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k,
                             const float* A, std::size_t lda, const float* B, std::size_t ldb,
                             float* C, std::size_t ldc) {
  const float one = 1, zero = 0;
  const auto i = [](std::size_t x) { return static_cast<int>(x); };
  HOGWILD_CUBLAS(cublas().sgemm(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                tb ? CUBLAS_OP_T : CUBLAS_OP_N, i(m), i(n), i(k), &one, A, i(lda),
                                B, i(ldb), &zero, C, i(ldc)));
}

}  // namespace hogwild::detail
