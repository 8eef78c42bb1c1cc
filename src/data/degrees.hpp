// How often each feature occurs in a data set's rows, and the most frequent ones:
// what --hot-k keeps private to each worker (modes/hogwild/hot_window.hpp) and what
// --conflicts watches (science/conflicts.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild {

// A feature that occurs, and how many rows hold it.
struct FeatureDegree {
  std::uint32_t feature, rows;
  bool operator==(const FeatureDegree&) const = default;
};

// The features among the first `features` that a sparse set's rows hold, ascending,
// each with its count of rows (empty for the other layouts). Its memory is of the
// order of the set's non-zeros, not of `features`: a hashed feature space of 2^32
// costs no 16 GiB table.
std::vector<FeatureDegree> feature_degrees(const Dataset& data, std::size_t features);
// The rows holding `feature` (0 where none does), by binary search of `degrees`.
std::uint32_t degree_of(std::span<const FeatureDegree> degrees, std::size_t feature);
// The min(k, features that occur) features of the largest degree, largest first
// (ties: lower index first). Features that never occur are never among them.
std::vector<std::uint32_t> most_frequent(std::span<const FeatureDegree> degrees, std::size_t k);
// most_frequent(feature_degrees(data, features), k).
std::vector<std::uint32_t> most_frequent_features(const Dataset& data, std::size_t features,
                                                  std::size_t k);

}  // namespace hogwild
