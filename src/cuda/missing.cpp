// The GPU half's entry points in a build without CUDA (-Dcuda=disabled, or no
// toolkit found): they say so.
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "memory/device_arena.hpp"
#include "trainer/device_steps.hpp"

namespace hogwild {

CudaStatus cuda_status() {
  return {false, 0,
          "this build has no CUDA code (the CUDA toolkit was not found or -Dcuda=disabled; "
          "docs/GPU.md says how to build it)"};
}

}  // namespace hogwild

namespace hogwild::detail {

void cuda_init(const std::string&, int) {
  throw ConfigError("no CUDA device: " + cuda_status().message);
}

std::size_t device_free_bytes() { return 0; }

void device_synchronize() {}

std::unique_ptr<DeviceSteps> make_device_steps(const TrainConfig&, const Model&, const Dataset&,
                                               const float*, const ParamSet&, int*,
                                               const StoredRows*) {
  throw ConfigError("no CUDA device: " + cuda_status().message);
}

std::unique_ptr<DeviceMemory> cuda_device_memory(CudaIpc) {
  throw ConfigError("no CUDA device: " + cuda_status().message);
}

}  // namespace hogwild::detail
