// The built-in models' device kernels: what each trains (its check) and its maker
// (src/cuda/model_kernels.cpp).
#include <fmt/format.h>

#include "device/kernel_registry.hpp"
#include "hogwild/error.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild::detail {

namespace {

// A warp per example: --batch above 1 is ddp's mini-batch (the gradient the ranks
// sum) only, and the launches fill the device with warps, each a Hogwild! worker.
void one_example_a_warp(const TrainConfig& cfg, const Model& model, DeviceAccess access) {
  if (cfg.batch != 1 && access != DeviceAccess::gradient)
    throw ConfigError("--batch above 1 does not apply to --device cuda: a warp per example "
                      "updates the shared weights on the device");
  if (cfg.device_streams > 1)
    throw ConfigError(fmt::format("--device-streams applies to the MLP: {}'s launches fill the "
                                  "device with warps, each a Hogwild! worker, already",
                                  model.name()));
}

// The MLP: mini-batches of --batch rows (cuBLAS SGEMM, fp32), on --device-streams
// streams a process.
void mlp_trains(const TrainConfig& cfg, const Model& model, DeviceAccess access) {
  if (model_as<MlpModel>(model).options().matmul != MatmulPrecision::fp32)
    throw ConfigError("--device cuda multiplies the MLP's matrices in fp32 (cuBLAS SGEMM): "
                      "leave out --matmul bf16");
  if (cfg.device_streams > 1 && (access == DeviceAccess::serial || access == DeviceAccess::gradient))
    throw ConfigError(fmt::format("--device-streams {} makes Hogwild! workers inside a process: "
                                  "--mode {} has one step at a time", cfg.device_streams,
                                  to_string(cfg.mode)));
}

}  // namespace

std::map<std::string, DeviceKernelDef> builtin_device_kernels() {
  const DeviceKernelDef linear{one_example_a_warp, make_linear_kernel, true};
  return {{"logistic", linear},
          {"hinge", linear},
          {"squared", linear},
          {"softmax", {one_example_a_warp, make_softmax_kernel, true}},
          {"mf", {one_example_a_warp, make_mf_kernel, false}},  // biases a user's, an item's
          {"mlp", {mlp_trains, make_mlp_kernel, true, false}}};
}

}  // namespace hogwild::detail
