// Hot coordinates: the bias and the few features that most examples touch. Under
// Hogwild their cache lines bounce between cores on every example (two workers
// racing on SpamAssassin's weights ran no faster than one). A worker that owns a
// HotCoordinates adds its updates of those coordinates to a private buffer, reads
// them as shared value + its own pending delta, and flushes the buffer into the
// shared weights with one U::add per coordinate every few examples (HOGWILD++,
// DimmWitted). Other workers see the worker's hot updates up to `flush` examples
// late; that staleness is the price, measured in docs/PERFORMANCE.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild {

class HotCoordinates {
 public:
  static constexpr std::size_t kMaxK = 255;  // slots are bytes: the lookup stays small

  // Picks the min(k, kMaxK) features most frequent in `rows` of a sparse dataset
  // (ties: lower index first). Features never seen in `rows` are never hot.
  void select(const Dataset& data, std::span<const std::uint32_t> rows, std::size_t features,
              std::size_t k);
  bool active() const noexcept { return !slot_.empty(); }
  std::size_t size() const noexcept { return index_.size(); }
  const std::vector<std::uint32_t>& features() const noexcept { return index_; }

  // Slot of feature j: 0 for a cold feature, whose delta is always 0, so that
  // `read(w + j) + delta()[slot(j)]` needs no branch.
  const std::uint8_t* slots() const noexcept { return slot_.data(); }
  float* delta() noexcept { return delta_.data(); }
  float bias_delta = 0;
  std::size_t pending = 0;  // examples since the last flush

  // Adds every pending delta to the shared weights (one U::add each) and clears it.
  template <class U>
  void flush(float* w, float* bias) noexcept {
    for (std::size_t s = 1; s < delta_.size(); ++s) {
      if (delta_[s] != 0) U::add(w + index_[s - 1], delta_[s]);
      delta_[s] = 0;
    }
    if (bias && bias_delta != 0) U::add(bias, bias_delta);
    bias_delta = 0;
    pending = 0;
  }

 private:
  std::vector<std::uint8_t> slot_;    // per feature
  std::vector<float> delta_;          // per slot; [0] is the cold slot
  std::vector<std::uint32_t> index_;  // feature of slot s + 1
};

}  // namespace hogwild
