// The trainer's side of the device kernels' registry (hogwild/device_kernel.hpp):
// looking a model's kernel up, and the built-in models' kernels.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "hogwild/device_kernel.hpp"
#include "hogwild/error.hpp"
#include "hogwild/model.hpp"

namespace hogwild::detail {

// The kernel registered for `model` (a copy, taken under the registry's lock);
// ConfigError naming the models that have one.
DeviceKernelDef device_kernel_def(const std::string& model);

// Whether the program registered a kernel of its own (a fork server that is a
// program of its own would not know it).
bool device_kernels_added();

// The built-in models' kernels (device/builtin_kernels.cpp): their checks here,
// their makers below.
std::map<std::string, DeviceKernelDef> builtin_device_kernels();

// A built-in kernel's model as its own type: the kernel is registered under the
// model's name, so another type there is a model registered under a built-in name
// without a kernel of its own.
template <class M>
const M& model_as(const Model& model) {
  if (const auto* m = dynamic_cast<const M*>(&model)) return *m;
  throw ConfigError("--device cuda: model " + model.name() +
                    " is not the built-in model of that name, and its kernel is the built-in "
                    "one's (register a kernel of its own with register_device_kernel)");
}

// The built-in kernels (src/cuda/model_kernels.cpp; in a build without CUDA,
// cuda/missing.cpp's say there is no CUDA code).
std::unique_ptr<DeviceKernel> make_linear_kernel(const DeviceKernelSetup& s);
std::unique_ptr<DeviceKernel> make_mf_kernel(const DeviceKernelSetup& s);
std::unique_ptr<DeviceKernel> make_softmax_kernel(const DeviceKernelSetup& s);
std::unique_ptr<DeviceKernel> make_mlp_kernel(const DeviceKernelSetup& s);

}  // namespace hogwild::detail
