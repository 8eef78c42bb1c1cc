#include "modes/ddp/device_sync.hpp"

#include <algorithm>

#include "modes/ddp/gradient_sync.hpp"

namespace hogwild::detail {

DeviceGradientSync::DeviceGradientSync(DeviceSteps& steps, std::unique_ptr<Communicator> comm,
                                       std::size_t batch, unsigned accumulate,
                                       std::size_t bucket_bytes)
    : steps_of_(steps),
      comm_(std::move(comm)),
      batch_(std::max<std::size_t>(batch, 1)),
      accumulate_(std::max(1u, accumulate)),
      bucket_floats_((bucket_bytes ? bucket_bytes : GradientSync::kBucketBytes) / sizeof(float)) {}

void DeviceGradientSync::broadcast_weights() {
  if (comm_->size() < 2) return;
  for (std::span<std::byte> w : steps_of_.weights()) comm_->broadcast(w, 0);
}

double DeviceGradientSync::gradient(std::size_t begin, std::size_t count, float lr) {
  ++pending_;
  return steps_of_.gradient(begin, count, lr);
}

void DeviceGradientSync::step(float lr) {
  const std::span<float> g = steps_of_.gradient_buffer();
  if (comm_->size() > 1) {
    std::size_t at = 0;
    std::size_t bucket = GradientSync::kFirstBucketBytes / sizeof(float);
    while (at < g.size()) {
      const std::size_t n = std::min(bucket, g.size() - at);
      comm_->all_reduce(g.subspan(at, n));
      at += n;
      bucket = bucket_floats_;
    }
  }
  steps_of_.apply(lr, 1.0f / static_cast<float>(comm_->size()));
  pending_ = 0;
  ++steps_;
}

}  // namespace hogwild::detail
