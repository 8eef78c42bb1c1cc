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
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/device_kernel.hpp"
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

  // --mode ddp (one rank per GPU; modes/ddp/device_sync.hpp). The defaults throw
  // ConfigError: a backend without a gradient path trains no ddp.
  //
  // Adds the gradient of positions [begin, begin + count) of the order, at the
  // current weights, to the gradient buffer, the weights unchanged; returns those
  // examples' summed loss. lr is the step size apply() will use (a backend may fold
  // it in, as the CPU's captured step does).
  virtual double gradient(std::size_t begin, std::size_t count, float lr);
  // The gradient buffer, every tensor's in one span of the steps' memory space
  // (device memory for CUDA's): what the ranks sum.
  virtual std::span<float> gradient_buffer();
  // Steps this rank's weights by scale times the sum of the means of the mini-batches
  // given to gradient() since the last apply (as the CPU's --accumulate sums them),
  // at step size lr with the optimiser; then zeroes the buffer.
  virtual void apply(float lr, float scale);
  // This rank's weights and optimiser state, span by span in the set's order (the
  // same spans on every rank): before the first step, rank 0's go to the others.
  // Rank 0 trains the run's tensors; the others train replicas of their own.
  virtual std::vector<std::span<std::byte>> weights();
};

// A set's weights and optimiser state, span by span (DeviceSteps::weights).
std::vector<std::span<std::byte>> weight_spans(const ParamSet& params);

// What --device cuda trains: ConfigError naming what is not supported (a model,
// a mode, an option), before anything is allocated.
void check_device_run(const TrainConfig& cfg, const Model& model);

struct StoredRows;
// A worker's steps for `model` over `data` with `targets` (`rows`: their copy in
// the device arena; null: uploaded now, into this worker's own memory), on `params`
// (in the device arena; `lock`: the arena's lock word), with the mode's access and
// the optimiser of `cfg`. Under --mode ddp, worker `rank` runs on GPU `rank`: rank 0
// trains `params`, the others a replica on their own GPU (with their own copy of
// the rows: the arena is on GPU 0). `access`: the mode's (ModeDef::device_access).
std::unique_ptr<DeviceSteps> make_device_steps(const TrainConfig& cfg, DeviceAccess access,
                                               const Model& model, const Dataset& data,
                                               const float* targets, const ParamSet& params,
                                               int* lock, const StoredRows* rows = nullptr,
                                               unsigned rank = 0);

}  // namespace hogwild::detail
