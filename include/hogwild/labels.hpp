// Maps raw labels (0/1, ±1, class ints, floats) to the targets a model trains on.
// The map is fitted on the training set and applied to the test set, so a test
// label the training set never had is an error, not a silent wrong answer.
#pragma once

#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/problem.hpp"

namespace hogwild {

class LabelMap {
 public:
  static constexpr std::size_t kMaxClasses = 1000;

  // Throws ConfigError when the labels do not fit the model (e.g. five classes for
  // a binary model), naming the file and the labels found.
  static LabelMap fit(LabelKind kind, const Dataset& train, const std::string& model_name);

  // Resolved kind: binary, multiclass or real.
  LabelKind kind() const noexcept { return kind_; }
  // 2 for binary, K for multiclass, 0 for real.
  std::size_t classes() const noexcept;
  // Sorted distinct training labels (binary, multiclass).
  const std::vector<float>& values() const noexcept { return values_; }

  // One target per row; throws DataError for a label outside the fitted set.
  std::vector<float> targets(const Dataset& d) const;

  // Binary: whether the labels were 0/1 or -1/+1 (any label above 0 is positive).
  bool sign_convention() const noexcept { return sign_convention_; }
  // The label of class k (binary: 0 negative, 1 positive), as the training data
  // wrote it: a model's prediction in the data's own terms.
  float label_of(std::size_t k) const noexcept;
  // A map as fitted before (a model file's): ConfigError for an inconsistent one.
  static LabelMap restore(LabelKind kind, std::vector<float> values, bool sign_convention);

 private:
  LabelKind kind_ = LabelKind::real;
  bool sign_convention_ = false;  // binary {0,1} or {-1,+1}: positive means > 0
  std::vector<float> values_;
};

}  // namespace hogwild
