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
#include <memory>

#include "comm/communicator.hpp"
#include "device/device_steps.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild::detail {

class DeviceGradientSync final : public DevicePart {
 public:
  // comm: every rank of the run (NCCL's, where the backend has it); batch: the rows of
  // a launch, a mini-batch; bucket_bytes: the size of the buckets after the first
  // (0: 25 MiB).
  DeviceGradientSync(DeviceSteps& steps, std::unique_ptr<Communicator> comm, std::size_t batch,
                     unsigned accumulate, std::size_t bucket_bytes);
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

  // Its part of the device path: a mini-batch's gradient a launch, the ranks' sum
  // applied every `accumulate` of them, and at a whole epoch's end what is pending
  // (every rank has the same count of rows, so all of them get there).
  std::size_t chunk() const override { return batch_; }
  bool train(std::size_t begin, std::size_t count, float lr, const EpochPlace& place,
             double& loss) override {
    loss += gradient(begin, count, lr);
    return !due() || place.collective([&] { step(lr); });
  }
  void end_epoch(float lr, const EpochPlace& place, bool whole) override {
    if (pending() && whole) place.collective([&] { step(lr); });
  }

 private:
  DeviceSteps& steps_of_;
  std::unique_ptr<Communicator> comm_;
  std::size_t batch_;
  unsigned accumulate_;
  std::size_t bucket_floats_;
  unsigned pending_ = 0;
  std::size_t steps_ = 0;
};

}  // namespace hogwild::detail
