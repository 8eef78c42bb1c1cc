// Raw labels to targets: 0/1, ±1, two arbitrary values, classes, and errors.
#include <doctest/doctest.h>

#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"

using namespace hogwild;

namespace {
Dataset with_labels(std::vector<float> labels, const char* name = "data.svm") {
  std::vector<std::uint64_t> off(labels.size() + 1, 0);
  return Dataset::sparse(labels, off, {}, {}, 1, name);
}
}  // namespace

TEST_CASE("binary labels: 0/1, -1/+1 and two arbitrary values") {
  auto t = LabelMap::fit(LabelKind::binary, with_labels({0, 1, 1, 0}), "logistic").targets(with_labels({1, 0}));
  CHECK(t == std::vector<float>{1, 0});
  auto pm = LabelMap::fit(LabelKind::binary, with_labels({-1, 1}), "logistic");
  CHECK(pm.targets(with_labels({1, -1, 1})) == std::vector<float>{1, 0, 1});
  auto two = LabelMap::fit(LabelKind::binary, with_labels({2, 4, 4}), "logistic");
  CHECK(two.targets(with_labels({4, 2})) == std::vector<float>{1, 0});
  // A one-class training set under the sign convention is still well defined.
  auto one = LabelMap::fit(LabelKind::binary, with_labels({1, 1}), "logistic");
  CHECK(one.targets(with_labels({0, 1})) == std::vector<float>{0, 1});
}

TEST_CASE("a binary model refuses more than two classes, naming them") {
  try {
    LabelMap::fit(LabelKind::binary, with_labels({1, 2, 3}), "hinge");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    CHECK(w.find("hinge") != std::string::npos);
    CHECK(w.find("1, 2, 3") != std::string::npos);
    CHECK(w.find("softmax") != std::string::npos);
  }
  CHECK_THROWS_AS(LabelMap::fit(LabelKind::binary, with_labels({5, 5}), "logistic"), ConfigError);
}

TEST_CASE("multiclass targets are positions in the sorted training labels") {
  auto m = LabelMap::fit(LabelKind::multiclass, with_labels({7, 3, 5, 3}), "softmax");
  CHECK(m.classes() == 3);
  CHECK(m.targets(with_labels({3, 5, 7})) == std::vector<float>{0, 1, 2});
}

TEST_CASE("a test label outside the training labels is a data error naming the row") {
  auto m = LabelMap::fit(LabelKind::multiclass, with_labels({0, 1, 2}), "softmax");
  try {
    m.targets(with_labels({0, 9}, "test.svm"));
    FAIL("expected DataError");
  } catch (const DataError& e) {
    const std::string w = e.what();
    CHECK(w.find("test.svm") != std::string::npos);
    CHECK(w.find("row 2") != std::string::npos);
    CHECK(w.find("label 9") != std::string::npos);
  }
}

TEST_CASE("squared loss: binary on two labels, regression otherwise") {
  CHECK(LabelMap::fit(LabelKind::binary_or_real, with_labels({-1, 1}), "squared").kind() == LabelKind::binary);
  auto real = LabelMap::fit(LabelKind::binary_or_real, with_labels({0.5f, 1.5f, 2.25f}), "squared");
  CHECK(real.kind() == LabelKind::real);
  CHECK(real.targets(with_labels({3.5f})) == std::vector<float>{3.5f});
}
