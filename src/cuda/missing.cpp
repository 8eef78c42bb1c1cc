// The GPU half's entry points in a build without CUDA (-Dcuda=disabled, or no
// toolkit found): they say so. Each is defined by its qualified name, so that one
// whose declaration changed without it is a compile error, not a missing symbol at
// link time; and a build with CUDA compiles this file too (src/meson.build), so that
// error shows on a machine with the toolkit as well.
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "memory/device_arena.hpp"
#include "device/device_steps.hpp"
#include "device/kernel_registry.hpp"

namespace {
[[noreturn]] void no_device() {
  throw hogwild::ConfigError("no CUDA device: " + hogwild::cuda_status().message);
}
}  // namespace

hogwild::CudaStatus hogwild::cuda_status() {
  return {false, 0,
          "this build has no CUDA code (the CUDA toolkit was not found or -Dcuda=disabled; "
          "docs/GPU.md says how to build it)"};
}

void hogwild::detail::cuda_init(const std::string&, int) { no_device(); }

std::size_t hogwild::detail::device_free_bytes() { return 0; }

void hogwild::detail::device_synchronize() {}

std::unique_ptr<hogwild::detail::DeviceSteps> hogwild::detail::make_device_steps(
    const TrainConfig&, DeviceAccess, const Model&, const Dataset&, const float*,
    const ParamSet&, int*, const StoredRows*, unsigned) {
  no_device();
}

std::unique_ptr<hogwild::DeviceKernel> hogwild::detail::make_linear_kernel(
    const DeviceKernelSetup&) {
  no_device();
}

std::unique_ptr<hogwild::DeviceKernel> hogwild::detail::make_mf_kernel(const DeviceKernelSetup&) {
  no_device();
}

std::unique_ptr<hogwild::DeviceKernel> hogwild::detail::make_softmax_kernel(
    const DeviceKernelSetup&) {
  no_device();
}

std::unique_ptr<hogwild::DeviceKernel> hogwild::detail::make_mlp_kernel(
    const DeviceKernelSetup&) {
  no_device();
}

std::unique_ptr<hogwild::detail::DeviceMemory> hogwild::detail::cuda_device_memory(CudaIpc) {
  no_device();
}
