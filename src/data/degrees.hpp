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

// How many rows of a sparse set hold each of the first `features` features (empty
// for the other layouts).
std::vector<std::uint32_t> feature_degrees(const Dataset& data, std::size_t features);
// The min(k, features) features of the largest degree, largest first (ties: lower
// index first). Features that never occur are never among them.
std::vector<std::uint32_t> most_frequent(std::span<const std::uint32_t> degree, std::size_t k);
// most_frequent(feature_degrees(data, features), k).
std::vector<std::uint32_t> most_frequent_features(const Dataset& data, std::size_t features,
                                                  std::size_t k);

}  // namespace hogwild
