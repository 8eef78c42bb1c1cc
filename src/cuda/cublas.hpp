// cuBLAS, loaded at run time as NCCL is (dlopen "libcublas.so.13", then the
// toolkit's copy the build found): libhogwild loads on machines without it (the
// GPU kit does not carry its 600 MB), and a run that needs it there is told why
// not. Only what the MLP's products use: a handle on a stream, and SGEMM.
#pragma once

#include <cublas_v2.h>

namespace hogwild::detail {

struct Cublas {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSgemm_v2) sgemm = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
};

// The entry points; ConfigError "cuBLAS cannot be loaded: ..." where it is missing.
const Cublas& cublas();

// Throws Error naming the call, where it is and cuBLAS's words, unless `status` is
// CUBLAS_STATUS_SUCCESS (CUBLAS_STATUS_ALLOC_FAILED: ResourceError, exit 4).
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace hogwild::detail

#define HOGWILD_CUBLAS(call) ::hogwild::detail::check_cublas((call), #call, __FILE__, __LINE__)
