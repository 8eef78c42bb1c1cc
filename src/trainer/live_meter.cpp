#include "trainer/live_meter.hpp"

#include <algorithm>

#include "trainer/run.hpp"

namespace hogwild::detail {

LiveMeter::LiveMeter(const Run& run, const LiveCallback& on_live)
    : run_(run), on_live_(on_live), epoch_(run.min_epochs()) {}

void LiveMeter::tick(double time) {
  if (!on_live_ || time - last_ < kInterval) return;
  last_ = time;
  LiveProgress p;
  p.time = time;
  p.epochs = run_.cfg.epochs;
  p.epochs_done = run_.min_epochs();
  if (p.epochs_done >= p.epochs) return;
  if (p.epochs_done != epoch_) {
    epoch_ = p.epochs_done;
    epoch_start_ = time;
  }
  p.epoch_time = time - epoch_start_;
  p.epoch_rows = run_.train.rows();
  p.total = p.epoch_rows * p.epochs;
  // A worker's samples are e * (its rows) + its position in epoch e: its part of
  // the current epoch is what lies past the epochs all workers completed.
  for (unsigned r = 0; r < run_.progress.size(); ++r) {
    const auto [begin, end] = run_.partition(r);
    const std::uint64_t rows = end - begin;
    const std::uint64_t s = run_.progress[r].samples.load(std::memory_order_relaxed);
    p.samples += s;
    p.epoch_samples += std::min(rows, s - std::min(s, std::uint64_t{p.epochs_done} * rows));
  }
  window_.emplace_back(time, p.samples);
  while (window_.size() > 2 && window_[1].first <= time - kWindow) window_.pop_front();
  const auto& [t0, s0] = window_.front();
  if (time > t0 && p.samples > s0)  // a respawned worker's count may step back
    p.rate = static_cast<double>(p.samples - s0) / (time - t0);
  on_live_(p);
}

}  // namespace hogwild::detail
