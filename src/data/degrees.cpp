#include "data/degrees.hpp"

#include <algorithm>
#include <numeric>

namespace hogwild {

std::vector<std::uint32_t> feature_degrees(const Dataset& data, std::size_t features) {
  if (data.layout() != Layout::sparse) return {};
  std::vector<std::uint32_t> count(features, 0);
  for (std::uint32_t j : data.indices())
    if (j < features) ++count[j];
  return count;
}

std::vector<std::uint32_t> most_frequent(std::span<const std::uint32_t> count, std::size_t k) {
  std::vector<std::uint32_t> order(count.size());
  std::iota(order.begin(), order.end(), 0u);
  k = std::min(k, count.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::uint32_t a, std::uint32_t b) {
                      return count[a] != count[b] ? count[a] > count[b] : a < b;
                    });
  order.resize(k);
  while (!order.empty() && count[order.back()] == 0) order.pop_back();
  return order;
}

std::vector<std::uint32_t> most_frequent_features(const Dataset& data, std::size_t features,
                                                  std::size_t k) {
  return most_frequent(feature_degrees(data, features), k);
}

}  // namespace hogwild
