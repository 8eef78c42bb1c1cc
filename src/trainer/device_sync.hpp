// The synchronous step of --mode ddp on GPUs (--device cuda): each rank's kernel
// adds its mini-batch's gradient, at the current weights, to a buffer on its own GPU
// (DeviceSteps::gradient); every `accumulate` mini-batches the ranks sum the buffer
// with the Communicator (NCCL), bucket by bucket (the first bucket small, as
// PyTorch's DDP makes it), and every rank applies the same mean to its own weights:
// rank 0 those in the device arena (what the supervisor evaluates and checkpoints),
// the others their replicas, which start as rank 0's (broadcast_weights). The sums
// are NCCL's, the same on every rank, so the replicas stay equal.
//
// Unlike the CPU's GradientSync, nothing is applied in place by slices: the ranks'
// weights are on different GPUs, so each applies the whole step.
#pragma once

#include <cstddef>

#include "comm/communicator.hpp"
#include "device/device_steps.hpp"

namespace hogwild::detail {

class DeviceGradientSync {
 public:
  // bucket_bytes: the size of the buckets after the first (0: 25 MiB).
  DeviceGradientSync(DeviceSteps& steps, Communicator& comm, unsigned accumulate,
                     std::size_t bucket_bytes);
  DeviceGradientSync(const DeviceGradientSync&) = delete;
  DeviceGradientSync& operator=(const DeviceGradientSync&) = delete;

  // Rank 0's weights and optimiser state to every rank, before the first step.
  void broadcast_weights();
  // Adds the gradient of positions [begin, begin + count) of the epoch's order;
  // returns their summed loss.
  double gradient(std::size_t begin, std::size_t count, float lr);
  // True when `accumulate` mini-batches are in the buffer.
  bool due() const noexcept { return pending_ >= accumulate_; }
  bool pending() const noexcept { return pending_ > 0; }
  // Sums the buffer over the ranks and applies its mean at step size lr.
  void step(float lr);
  std::size_t steps() const noexcept { return steps_; }

 private:
  DeviceSteps& steps_of_;
  Communicator& comm_;
  unsigned accumulate_;
  std::size_t bucket_floats_;
  unsigned pending_ = 0;
  std::size_t steps_ = 0;
};

}  // namespace hogwild::detail
