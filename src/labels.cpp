#include "hogwild/labels.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

#include "hogwild/error.hpp"

namespace hogwild {

namespace {

// Distinct labels, stopping once there are more than `limit`.
std::vector<float> distinct(const Dataset& d, std::size_t limit) {
  std::set<float> s;
  for (float v : d.labels()) {
    s.insert(v);
    if (s.size() > limit) break;
  }
  return {s.begin(), s.end()};
}

std::string list(const std::vector<float>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + fmt::format("{}", v[i]);
  if (v.size() > 8) out += ", ...";
  return out;
}

}  // namespace

std::size_t LabelMap::classes() const noexcept {
  switch (kind_) {
    case LabelKind::binary: return 2;
    case LabelKind::multiclass: return values_.size();
    default: return 0;
  }
}

namespace {
// Class labels of 2^24 or more: a float holds no two whole numbers apart there
// (16777217 is read as 16777216), so two classes may have been read as one.
void check_exact(const std::vector<float>& v, const Dataset& train, const std::string& model_name) {
  for (const float x : v)
    if (std::fabs(x) >= 16777216.0f)
      throw ConfigError(fmt::format(
          "model {}: class label {} in {} is 2^24 or more, where a float cannot tell whole "
          "numbers apart (16777217 is read as 16777216, merging two classes): number the "
          "classes below 16777216", model_name, x, train.source()));
}
}  // namespace

LabelMap LabelMap::fit(LabelKind kind, const Dataset& train, const std::string& model_name) {
  LabelMap m;
  auto v = distinct(train, kMaxClasses);
  if (kind == LabelKind::binary_or_real) kind = v.size() <= 2 ? LabelKind::binary : LabelKind::real;
  m.kind_ = kind;
  switch (kind) {
    case LabelKind::real:
      return m;
    case LabelKind::binary: {
      const bool zero_one = std::all_of(v.begin(), v.end(), [](float x) { return x == 0 || x == 1; });
      const bool plus_minus = std::all_of(v.begin(), v.end(), [](float x) { return x == -1 || x == 1; });
      if (v.size() > 2)
        throw ConfigError(fmt::format(
            "model {} is binary but {} has {}{} distinct labels ({}); use --model softmax",
            model_name, train.source(), v.size() > kMaxClasses ? "more than " : "",
            std::min(v.size(), kMaxClasses), list(v)));
      m.sign_convention_ = zero_one || plus_minus;
      if (!m.sign_convention_) check_exact(v, train, model_name);
      if (!m.sign_convention_ && v.size() < 2)
        throw ConfigError(fmt::format("model {} needs two classes but every label in {} is {}",
                                      model_name, train.source(), list(v)));
      m.values_ = v;
      return m;
    }
    case LabelKind::multiclass:
      if (v.size() > kMaxClasses)
        throw ConfigError(fmt::format("model {} needs class labels but {} has more than {} distinct labels",
                                      model_name, train.source(), kMaxClasses));
      check_exact(v, train, model_name);
      m.values_ = v;
      return m;
    case LabelKind::binary_or_real:
      break;
  }
  return m;
}

float LabelMap::label_of(std::size_t k) const noexcept {
  if (kind_ == LabelKind::multiclass) return k < values_.size() ? values_[k] : std::nanf("");
  if (values_.size() == 2) return values_[k ? 1 : 0];
  // A sign-convention set that had one label: its other side as that convention writes it.
  const bool minus = std::find(values_.begin(), values_.end(), -1.f) != values_.end();
  return k ? 1.f : minus ? -1.f : 0.f;
}

LabelMap LabelMap::restore(LabelKind kind, std::vector<float> values, bool sign_convention) {
  const bool sorted = std::is_sorted(values.begin(), values.end()) &&
                      std::adjacent_find(values.begin(), values.end()) == values.end();
  const bool fits = kind == LabelKind::real         ? values.empty()
                    : kind == LabelKind::binary     ? values.size() == 2 || (sign_convention && values.size() == 1)
                    : kind == LabelKind::multiclass ? !values.empty() && values.size() <= kMaxClasses
                                                    : false;
  if (!sorted || !fits || std::any_of(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }))
    throw ConfigError(fmt::format("a label map of {} labels ({}) does not fit its kind", values.size(), list(values)));
  LabelMap m;
  m.kind_ = kind;
  m.values_ = std::move(values);
  m.sign_convention_ = sign_convention;
  return m;
}

std::vector<float> LabelMap::targets(const Dataset& d) const {
  std::vector<float> t(d.rows());
  auto labels = d.labels();
  for (std::size_t r = 0; r < d.rows(); ++r) {
    const float y = labels[r];
    switch (kind_) {
      case LabelKind::real:
        t[r] = y;
        continue;
      case LabelKind::binary:
        if (sign_convention_ && (y == 0 || y == 1 || y == -1)) {
          t[r] = y > 0 ? 1.f : 0.f;
          continue;
        }
        break;
      default:
        break;
    }
    auto it = std::lower_bound(values_.begin(), values_.end(), y);
    if (it == values_.end() || *it != y)
      throw DataError(d.source(), 0,
                      fmt::format("row {} has label {}, which the training set does not have "
                                  "(training labels: {})",
                                  r + 1, y, list(values_)));
    t[r] = kind_ == LabelKind::binary ? (it == values_.begin() && values_.size() == 2 ? 0.f : 1.f)
                                      : static_cast<float>(it - values_.begin());
  }
  return t;
}

}  // namespace hogwild
