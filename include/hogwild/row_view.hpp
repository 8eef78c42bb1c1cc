// One example's features as a model reads them (RowView), whatever the data set
// stores: what a model's step and an optimiser's update take, without the data set.
#pragma once

#include <cstdint>

namespace hogwild {

// A dense_u8 value is its byte times this (the same float as byte / 255.0f for every
// byte, so widened rows and byte rows hold equal values).
inline float byte_value(std::uint8_t b) noexcept { return static_cast<float>(b) / 255.0f; }

// A row as the models see it. index == nullptr means a dense row of nnz values:
// floats in `value`, or, for a dense_u8 set, bytes in `bytes` (value == nullptr).
// Only models that say so (Model::reads_byte_rows) are handed byte rows; the
// trainer widens the set to floats for the others.
struct RowView {
  const std::uint32_t* index;
  const float* value;
  std::uint32_t nnz;
  const std::uint8_t* bytes = nullptr;
  bool dense() const noexcept { return index == nullptr; }
  // Value j of the row's nnz (the j-th non-zero of a sparse row), whatever its storage.
  float at(std::uint32_t j) const noexcept { return bytes ? byte_value(bytes[j]) : value[j]; }
};

}  // namespace hogwild
