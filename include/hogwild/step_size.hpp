// The step size schedule of a run (TrainConfig::step_size).
#pragma once

#include <cmath>
#include <cstdint>

namespace hogwild {

// Step size: lr0 * decay^epoch / (1 + t / inverse_scale), t = examples seen by all
// workers so far (estimated as this worker's count times the number of workers).
struct StepSize {
  float lr0 = 0.1f;
  float decay = 1.0f;          // per-epoch backoff (Hogwild! paper: 0.9)
  double inverse_scale = 0.0;  // 0: no inverse-time decay
  float at(unsigned epoch, std::uint64_t t) const noexcept {
    return at_epoch_lr(epoch_start(epoch), t);
  }
  // lr0 * decay^epoch: the pow() is paid once per epoch, not once per mini-batch.
  double epoch_start(unsigned epoch) const noexcept {
    return lr0 * std::pow(static_cast<double>(decay), epoch);
  }
  // at() from epoch_start(epoch) computed beforehand.
  float at_epoch_lr(double epoch_lr, std::uint64_t t) const noexcept {
    if (inverse_scale > 0) epoch_lr /= 1.0 + static_cast<double>(t) / inverse_scale;
    return static_cast<float>(epoch_lr);
  }
};

}  // namespace hogwild
