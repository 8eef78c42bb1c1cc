#include "cuda/cublas.hpp"

#include <fmt/format.h>
#include <mutex>
#include <string>

#include "dynamic_library.hpp"
#include "hogwild/error.hpp"

#ifndef HOGWILD_CUBLAS_FALLBACK
#define HOGWILD_CUBLAS_FALLBACK "libcublas.so"
#endif
#define HOGWILD_STRING_(x) #x
#define HOGWILD_STRING(x) HOGWILD_STRING_(x)

namespace hogwild::detail {

const Cublas& cublas() {
  static Cublas api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    DynamicLibrary lib({"libcublas.so." HOGWILD_STRING(CUBLAS_VER_MAJOR), HOGWILD_CUBLAS_FALLBACK});
    lib.get("cublasCreate_v2", api.create);
    lib.get("cublasDestroy_v2", api.destroy);
    lib.get("cublasSetStream_v2", api.set_stream);
    lib.get("cublasSgemm_v2", api.sgemm);
    lib.get("cublasGetStatusString", api.status_string);
    failure = lib.failure();
  });
  if (!failure.empty())
    throw ConfigError("cuBLAS cannot be loaded (the MLP's products on the GPU need it): " +
                      failure);
  return api;
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* words = cublas().status_string ? cublas().status_string(status) : "?";
  const std::string what = fmt::format("{} failed at {}:{}: {} (cublasStatus_t {})", call, file,
                                       line, words, static_cast<int>(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw ResourceError(what);
  throw Error(what);
}

}  // namespace hogwild::detail
