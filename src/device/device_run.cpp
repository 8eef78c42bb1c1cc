// What --device cuda trains, said before anything is allocated (host logic: the
// same on machines with and without a GPU).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "device/device_steps.hpp"
#include "device/kernel_registry.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

namespace {

// The largest fraction of the examples that write one coordinate other than a bias
// written by all of them: a feature (sparse rows), a user or an item (ratings); 1
// for dense rows, whose every example writes every weight.
double hottest_fraction(const Dataset& data) {
  if (data.rows() == 0 || data.dense()) return 1;
  const auto idx = data.indices();
  std::vector<std::uint32_t> degree;
  if (data.layout() == Layout::ratings) {
    degree.assign(data.users() + data.cols(), 0);
    for (std::size_t r = 0; r < data.rows(); ++r) {
      ++degree[idx[2 * r]];
      ++degree[data.users() + idx[2 * r + 1]];
    }
  } else {  // sorted, not counted by column: a feature id near 2^32 would ask for 16 GiB
    std::vector<std::uint32_t> ids(idx.begin(), idx.end());
    std::sort(ids.begin(), ids.end());
    std::uint32_t run = 0;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      run = k > 0 && ids[k] == ids[k - 1] ? run + 1 : 1;
      degree.push_back(run);
    }
  }
  const std::uint32_t most = degree.empty() ? 0 : *std::max_element(degree.begin(), degree.end());
  return std::max(static_cast<double>(most), 1.0) / static_cast<double>(data.rows());
}

}  // namespace

unsigned device_warps_for(const TrainConfig& c, const Dataset& train_set, bool bias) {
  const auto access = detail::device_access(c.mode);
  if (access == DeviceAccess::serial || access == DeviceAccess::lock) return 1;
  if (c.device_warps != 0) return c.device_warps;
  // Atomic adds to the bias, which every example writes, serialise on it.
  const double hottest = bias && access == DeviceAccess::atomic ? 1.0 : hottest_fraction(train_set);
  const unsigned processes = std::max(1u, workers_used(c.mode, c.workers));
  const double all = std::clamp(std::floor(kDeviceWritersPerCoordinate / hottest),
                                static_cast<double>(kDeviceWarpsMin),
                                static_cast<double>(kDeviceWarpsMax));
  return std::max(1u, static_cast<unsigned>(std::ceil(all / processes)));
}

}  // namespace hogwild

namespace hogwild::detail {

void check_device_run(const TrainConfig& cfg, const Model& model) {
  const DeviceKernelDef kernel = device_kernel_def(model.name());
  const auto access = device_access(cfg.mode);
  if (!access)
    throw ConfigError(fmt::format(
        "--device cuda runs --mode {}, not {}",
        mode_names_where([](const ModeDef& m) { return m.device_access().has_value(); }),
        to_string(cfg.mode)));
  if (kernel.check) kernel.check(cfg, model, *access);
  // The gradient path (ddp): the ranks step together, summing their gradients.
  const bool gradient = access == DeviceAccess::gradient;
  const auto refuse = [](const char* option) {
    throw ConfigError(fmt::format("{} does not apply to --device cuda: a warp per example "
                                  "updates the shared weights on the device", option));
  };
  if (gradient && cfg.comm != "shm")
    throw ConfigError(fmt::format("--comm {} does not apply to --device cuda: ddp on GPUs sums "
                                  "its gradients with NCCL", cfg.comm));
  if (cfg.merge_every) refuse("--merge-every");
  if (cfg.hot_k) refuse("--hot-k");
  if (cfg.telemetry) refuse("--telemetry");
  if (cfg.conflicts) refuse("--conflicts");
  if (cfg.nodes > 1 && !gradient) refuse("--nodes outside --mode ddp");
  if (cfg.grad_delay_ns) refuse("--grad-delay-ns");
  if (cfg.straggler_worker >= 0) refuse("--straggler");
}

namespace {
[[noreturn]] void no_gradient_path() {
  throw ConfigError("this device backend has no gradient path: it trains no --mode ddp");
}
}  // namespace

double DeviceSteps::gradient(std::size_t, std::size_t, float) { no_gradient_path(); }
std::span<float> DeviceSteps::gradient_buffer() { no_gradient_path(); }
void DeviceSteps::apply(float, float) { no_gradient_path(); }
std::vector<std::span<std::byte>> DeviceSteps::weights() { no_gradient_path(); }

std::vector<std::span<std::byte>> weight_spans(const ParamSet& params) {
  std::vector<std::span<std::byte>> out;
  for (const auto& t : params.tensors()) {
    out.push_back({reinterpret_cast<std::byte*>(t.data), t.size * element_bytes(t.dtype)});
    if (t.state) out.push_back({reinterpret_cast<std::byte*>(t.state), t.size * sizeof(float)});
  }
  return out;
}

}  // namespace hogwild::detail
