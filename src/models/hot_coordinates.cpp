#include "hogwild/models/hot_coordinates.hpp"

#include <algorithm>
#include <numeric>

namespace hogwild {

void HotCoordinates::select(const Dataset& data, std::span<const std::uint32_t> rows,
                            std::size_t features, std::size_t k) {
  slot_.clear();
  delta_.clear();
  index_.clear();
  bias_delta = 0;
  pending = 0;
  if (data.layout() != Layout::sparse || features == 0) return;
  std::vector<std::uint32_t> count(features, 0);
  for (std::uint32_t r : rows) {
    const RowView x = data.row(r);
    for (std::uint32_t i = 0; i < x.nnz; ++i)
      if (x.index[i] < features) ++count[x.index[i]];
  }
  std::vector<std::uint32_t> order(features);
  std::iota(order.begin(), order.end(), 0u);
  k = std::min({k, kMaxK, features});
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::uint32_t a, std::uint32_t b) {
                      return count[a] != count[b] ? count[a] > count[b] : a < b;
                    });
  slot_.assign(features, 0);
  delta_.assign(1, 0.f);  // the cold slot: always 0, also with the bias alone hot
  for (std::size_t s = 0; s < k && count[order[s]] > 0; ++s) {
    index_.push_back(order[s]);
    slot_[order[s]] = static_cast<std::uint8_t>(s + 1);
    delta_.push_back(0.f);
  }
}

}  // namespace hogwild
