// The parent's live picture of a run (LiveProgress) for a display: read from the
// workers' progress records, with the rate measured over the last few seconds, and
// handed to the LiveCallback at most every kInterval.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "hogwild/trainer.hpp"

namespace hogwild::detail {

struct Run;

class LiveMeter {
 public:
  static constexpr double kInterval = 0.1;  // seconds between calls of the callback
  static constexpr double kWindow = 5;      // seconds the rate is measured over

  LiveMeter(const Run& run, const LiveCallback& on_live);
  explicit operator bool() const { return static_cast<bool>(on_live_); }
  // `time`: seconds of training so far. Calls the callback when kInterval has passed
  // since the last call and the run has an epoch left. Reads only atomics of the
  // run, so it may run on a thread beside the serial epoch's loop (but on one
  // thread at a time).
  void tick(double time);

 private:
  const Run& run_;
  const LiveCallback& on_live_;
  double last_ = 0;
  unsigned epoch_ = 0;  // epochs_done when the current epoch was first seen
  double epoch_start_ = 0;
  std::deque<std::pair<double, std::uint64_t>> window_;  // (time, samples)
};

}  // namespace hogwild::detail
