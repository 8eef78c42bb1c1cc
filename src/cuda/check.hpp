// Thin checks for CUDA runtime and driver calls: a failed call throws Error naming
// the call, where it is, and what CUDA said; out of memory is a ResourceError
// (exit 4).
#pragma once

#include <cuda_runtime.h>


namespace hogwild::detail {

[[noreturn]] void cuda_failed(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void driver_failed(int result, const char* call, const char* file, int line);

}  // namespace hogwild::detail

#define HOGWILD_CUDA(call)                                                           \
  do {                                                                               \
    const cudaError_t hogwild_cuda_e_ = (call);                                      \
    if (hogwild_cuda_e_ != cudaSuccess)                                              \
      ::hogwild::detail::cuda_failed(hogwild_cuda_e_, #call, __FILE__, __LINE__);    \
  } while (0)

#define HOGWILD_CU(call)                                                             \
  do {                                                                               \
    const int hogwild_cu_r_ = static_cast<int>(call);                                \
    if (hogwild_cu_r_ != 0)                                                          \
      ::hogwild::detail::driver_failed(hogwild_cu_r_, #call, __FILE__, __LINE__);    \
  } while (0)
