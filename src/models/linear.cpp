#include "hogwild/models/linear.hpp"

#include "models/linear_loss.hpp"

#include <algorithm>
#include <cmath>

namespace hogwild {

std::string LinearModel::name() const {
  switch (loss_) {
    case LinearLoss::logistic: return "logistic";
    case LinearLoss::hinge: return "hinge";
    case LinearLoss::squared: return "squared";
  }
  return "?";
}

void LinearModel::configure(const Problem& problem) {
  require_feature_rows(name(), problem);
  features_ = problem.features;
  classification_ = loss_ != LinearLoss::squared || problem.classes == 2;
}

std::vector<TensorSpec> LinearModel::parameters() const {
  std::vector<TensorSpec> t{{"w", features_, {}}};
  if (options_.bias) t.push_back({"b", 1, {}, Dtype::f32, {1}});
  return t;
}

void LinearModel::loss_and_slope(float z, float y, float& loss, float& slope) const noexcept {
  static_assert(static_cast<int>(LinearLoss::logistic) == 0 &&
                static_cast<int>(LinearLoss::hinge) == 1 &&
                static_cast<int>(LinearLoss::squared) == 2);  // linear_loss.hpp's kinds
  detail::linear_loss_and_slope(static_cast<std::uint8_t>(loss_), signed_targets(), z, y, loss,
                                slope);
}

template <class U>
double LinearModel::step(const Batch& b, const ParamSet& p, float lr) {
  const float* w = p.data(0);
  const float* bias = options_.bias ? p.data(1) : nullptr;
  const float inv = 1 / static_cast<float>(b.size);
  const float l2 = options_.l2 * inv;
  if (b.size == 1) {  // classic Hogwild!: one example, read then write
    const RowView x = b.row(0);
    const float z = row_dot<U>(w, x) + (bias ? U::read(bias) : 0.f);
    float loss, slope;
    loss_and_slope(z, b.target(0), loss, slope);
    row_descend<U>(p[0], 0, slope, l2, x, lr);
    if (bias) U::descend(p[1], 0, slope, lr);
    return loss;
  }
  // Mini-batch: every margin at the weights as read at the start of the batch.
  slopes_.resize(b.size);
  double total = 0;
  for (std::size_t i = 0; i < b.size; ++i) {
    const float z = row_dot<U>(w, b.row(i)) + (bias ? U::read(bias) : 0.f);
    float loss;
    loss_and_slope(z, b.target(i), loss, slopes_[i]);
    total += loss;
  }
  float bias_grad = 0;
  for (std::size_t i = 0; i < b.size; ++i) {
    row_descend<U>(p[0], 0, slopes_[i] * inv, l2, b.row(i), lr);
    bias_grad += slopes_[i] * inv;
  }
  if (bias) U::descend(p[1], 0, bias_grad, lr);
  return total;
}

Model::Ranges LinearModel::trained_ranges(std::size_t tensor, const Dataset& train,
                                          std::size_t begin_row, std::size_t end_row) const {
  if (tensor != 0 || train.layout() != Layout::sparse) return {};
  std::vector<std::uint8_t> seen(features_, 0);
  for (std::size_t r = begin_row; r < std::min(end_row, train.rows()); ++r) {
    const RowView x = train.row(r);
    for (std::uint32_t k = 0; k < x.nnz; ++k)
      if (x.index[k] < features_) seen[x.index[k]] = 1;
  }
  Ranges out;
  for (std::size_t j = 0; j < features_; ++j) {
    if (!seen[j]) continue;
    if (!out.empty() && out.back().second == j)
      out.back().second = j + 1;
    else
      out.emplace_back(j, j + 1);
  }
  if (out.empty()) out.emplace_back(0, 0);  // nothing trains: copy nothing, not all
  return out;
}

bool LinearModel::touched(std::size_t tensor, const Batch& b,
                          std::vector<std::uint32_t>& keys) const {
  if (tensor != 0) return false;  // the bias: one coordinate
  for (std::size_t n = 0; n < b.size; ++n)
    if (b.row(n).dense()) return false;
  for (std::size_t n = 0; n < b.size; ++n) {
    const RowView x = b.row(n);
    for (std::uint32_t k = 0; k < x.nnz; ++k)
      if (x.index[k] < features_) keys.push_back(x.index[k]);
  }
  return true;
}

void LinearModel::predict(const ParamSet& p, RowView x, float target_value, double& loss,
                          bool& correct) const {
  const float z = row_dot<SerialUpdate>(p.data(0), x) + (options_.bias ? *p.data(1) : 0.f);
  float l, slope;
  loss_and_slope(z, target_value, l, slope);
  loss = l;
  correct = classification_ && ((z > 0) == (target_value > 0.5f));
}

void LinearModel::predict_rows(const ParamSet& p, std::span<const RowView> rows,
                               float* out) const {
  const bool probabilities = outputs() == 2;
  for (const RowView& x : rows) {
    const float z = row_dot<SerialUpdate>(p.data(0), x) + (options_.bias ? *p.data(1) : 0.f);
    if (!probabilities) {
      *out++ = z;
      continue;
    }
    // Each side from its own exponential: neither is 1 - (the other), which would
    // round a confident prediction's small probability to 0.
    *out++ = 1 / (1 + std::exp(z));
    *out++ = 1 / (1 + std::exp(-z));
  }
}

HOGWILD_INSTANTIATE_STEP(LinearModel);

}  // namespace hogwild
