// The device kernels' registry: the built-in models' and the ones programs add.
#include "device/kernel_registry.hpp"

#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hogwild/error.hpp"

namespace hogwild {

std::size_t DeviceKernel::chunk_size(DeviceAccess access) const {
  return access == DeviceAccess::serial ? 4096 : std::size_t{1} << 16;
}

namespace {

std::mutex registry_mutex;
bool g_added = false;  // a program registered a kernel of its own

std::map<std::string, DeviceKernelDef>& registry() {
  static std::map<std::string, DeviceKernelDef> r = detail::builtin_device_kernels();
  return r;
}

}  // namespace

void register_device_kernel(const std::string& model, DeviceKernelDef def) {
  if (!def.make)
    throw ConfigError(fmt::format("register_device_kernel(\"{}\"): the definition has no make",
                                  model));
  std::lock_guard g(registry_mutex);
  registry()[model] = std::move(def);
  g_added = true;
}

namespace detail {

bool device_kernels_added() {
  std::lock_guard g(registry_mutex);
  return g_added;
}

}  // namespace detail

std::vector<std::string> device_kernel_models() {
  std::lock_guard g(registry_mutex);
  std::vector<std::string> names;
  for (const auto& [name, def] : registry()) names.push_back(name);
  return names;
}

namespace detail {

DeviceKernelDef device_kernel_def(const std::string& model) {
  {
    std::lock_guard g(registry_mutex);
    const auto it = registry().find(model);
    if (it != registry().end()) return it->second;
  }
  throw ConfigError(fmt::format("--device cuda trains the models {}, not {} (it trains on the "
                                "CPU; a model of your own brings a kernel with "
                                "register_device_kernel, before start_fork_server(): the "
                                "workers are forked from the server; docs/GPU.md)",
                                fmt::join(device_kernel_models(), ", "), model));
}

}  // namespace detail

}  // namespace hogwild
