// A worker's steps on the GPU (--device cuda): the seam between the step loop and
// the CUDA half. A worker uploads its rows once, then each epoch the order of its
// rows, and trains it in chunks: one kernel launch per chunk, a warp per example
// (src/cuda/kernels.hpp), the loop publishing its place and checking for a stop
// between chunks (step_loop.cpp's train_epoch_device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "hogwild/dataset.hpp"
#include "hogwild/model.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild::detail {

class DeviceSteps {
 public:
  virtual ~DeviceSteps() = default;
  // Examples per launch: enough to keep the device busy, few enough that a stop is
  // seen within milliseconds.
  virtual std::size_t chunk() const noexcept = 0;
  // Uploads the epoch's order of rows (indices into the uploaded dataset).
  virtual void begin_epoch(std::span<const std::uint32_t> rows) = 0;
  // Trains positions [begin, begin + count) of the order at step size lr; returns
  // once the kernel is done, with the summed loss of those examples (each before
  // its own update).
  virtual double train(std::size_t begin, std::size_t count, float lr) = 0;
};

// What --device cuda trains: ConfigError naming what is not supported (a model,
// a mode, an option), before anything is allocated.
void check_device_run(const TrainConfig& cfg, const Model& model);

struct StoredRows;
// A worker's steps for `model` over `data` with `targets` (`rows`: their copy in
// the device arena; null: uploaded now, into this worker's own memory), on `params`
// (in the device arena; `lock`: the arena's lock word), with the mode's access and
// the optimiser of `cfg`.
std::unique_ptr<DeviceSteps> make_device_steps(const TrainConfig& cfg, const Model& model,
                                               const Dataset& data, const float* targets,
                                               const ParamSet& params, int* lock,
                                               const StoredRows* rows = nullptr);

}  // namespace hogwild::detail
