// A mini-batch as a step receives it, and what an evaluation returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hogwild/dataset.hpp"

namespace hogwild {

// A batch of rows, by index into the dataset, with their targets.
struct Batch {
  const Dataset* data;
  const float* targets;  // one per dataset row
  const std::uint32_t* rows;
  std::size_t size;
  RowView row(std::size_t i) const noexcept { return data->row(rows[i]); }
  float target(std::size_t i) const noexcept { return targets[rows[i]]; }
};

struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();      // mean loss per row
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // classification only
  double rmse = std::numeric_limits<double>::quiet_NaN();      // regression only
  std::size_t rows = 0;
};

}  // namespace hogwild
