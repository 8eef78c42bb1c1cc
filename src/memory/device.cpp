#include "hogwild/device.hpp"

#include <fmt/format.h>

#include "hogwild/config.hpp"
#include "hogwild/error.hpp"

namespace hogwild {

const char* to_string(Device d) noexcept { return d == Device::cuda ? "cuda" : "cpu"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  throw ConfigError(fmt::format("--device must be cpu or cuda, not '{}'", name));
}

const char* to_string(CudaIpc c) noexcept { return c == CudaIpc::legacy ? "legacy" : "vmm"; }

CudaIpc parse_cuda_ipc(const std::string& name) {
  if (name == "vmm") return CudaIpc::vmm;
  if (name == "legacy") return CudaIpc::legacy;
  throw ConfigError(fmt::format("--cuda-ipc must be vmm or legacy, not '{}'", name));
}

bool cuda_built() noexcept { return HOGWILD_HAVE_CUDA != 0; }

}  // namespace hogwild
