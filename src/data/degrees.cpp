#include "data/degrees.hpp"

#include <algorithm>

namespace hogwild {

std::vector<FeatureDegree> feature_degrees(const Dataset& data, std::size_t features) {
  std::vector<FeatureDegree> out;
  if (data.layout() != Layout::sparse) return out;
  const auto indices = data.indices();
  if (features <= 2 * indices.size() + 65536) {
    // A table a feature costs no more than the rows' indices do: count in it.
    std::vector<std::uint32_t> count(features, 0);
    for (const std::uint32_t j : indices)
      if (j < features) ++count[j];
    for (std::size_t j = 0; j < features; ++j)
      if (count[j] != 0) out.push_back({static_cast<std::uint32_t>(j), count[j]});
    return out;
  }
  // Features far more than non-zeros (a hashed space): the indices sorted, then runs.
  std::vector<std::uint32_t> sorted;
  sorted.reserve(indices.size());
  for (const std::uint32_t j : indices)
    if (j < features) sorted.push_back(j);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t end = i + 1;
    while (end < sorted.size() && sorted[end] == sorted[i]) ++end;
    out.push_back({sorted[i], static_cast<std::uint32_t>(end - i)});
    i = end;
  }
  return out;
}

std::uint32_t degree_of(std::span<const FeatureDegree> degrees, std::size_t feature) {
  const auto at = std::lower_bound(degrees.begin(), degrees.end(), feature,
                                   [](const FeatureDegree& d, std::size_t f) { return d.feature < f; });
  return at != degrees.end() && at->feature == feature ? at->rows : 0;
}

std::vector<std::uint32_t> most_frequent(std::span<const FeatureDegree> degrees, std::size_t k) {
  std::vector<FeatureDegree> order(degrees.begin(), degrees.end());
  k = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [](const FeatureDegree& a, const FeatureDegree& b) {
                      return a.rows != b.rows ? a.rows > b.rows : a.feature < b.feature;
                    });
  std::vector<std::uint32_t> out(k);
  for (std::size_t i = 0; i < k; ++i) out[i] = order[i].feature;
  return out;
}

std::vector<std::uint32_t> most_frequent_features(const Dataset& data, std::size_t features,
                                                  std::size_t k) {
  return most_frequent(feature_degrees(data, features), k);
}

}  // namespace hogwild
