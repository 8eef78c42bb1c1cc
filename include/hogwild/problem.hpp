// The training problem a model is configured for, and what its labels mean.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hogwild/dataset.hpp"

namespace hogwild {

// What the labels mean to a model; the trainer maps raw labels to targets.
enum class LabelKind : std::uint8_t {
  binary,          // targets 0/1 (from 0/1, -1/+1, or any two distinct values)
  multiclass,      // targets 0..classes-1 (sorted distinct training labels)
  real,            // targets are the raw labels
  binary_or_real,  // binary when the training set has two distinct labels, else real
};

// The training problem a model is built for.
struct Problem {
  std::size_t features = 0;  // columns of the training set
  std::size_t classes = 0;   // distinct training labels (multiclass), 2 (binary), 0 (real)
  Layout layout = Layout::sparse;
  // Ratings (Layout::ratings): 1 + the largest user and item id over train and test.
  std::size_t users = 0, items = 0;
  double target_mean = 0;  // mean training target (real labels); 0 otherwise
};

}  // namespace hogwild
