#include "hogwild/models/softmax.hpp"

#include <algorithm>
#include <cmath>

#include "hogwild/error.hpp"
#include "models/batch_features.hpp"

namespace hogwild {

void SoftmaxModel::configure(const Problem& problem) {
  require_feature_rows(std::string("softmax"), problem);
  if (problem.classes < 2)
    throw ConfigError("softmax needs at least 2 classes in the training labels, found " +
                      std::to_string(problem.classes));
  features_ = problem.features;
  classes_ = problem.classes;
  stride_ = (features_ + 15) / 16 * 16;
}

std::vector<TensorSpec> SoftmaxModel::parameters() const {
  std::vector<TensorSpec> t{{"W", classes_ * stride_, {}, Dtype::f32, {classes_, stride_}}};
  if (options_.bias) t.push_back({"b", classes_, {}});
  return t;
}

bool SoftmaxModel::touched(std::size_t tensor, const Batch& b,
                           std::vector<std::uint32_t>& keys) const {
  std::vector<std::uint32_t> features;
  if (tensor != 0 || !detail::batch_features(b, features_, features)) return false;
  HOGWILD_ENFORCE_LE(classes_ * stride_, std::size_t{UINT32_MAX});
  // W is classes x stride, row-major: class k's weight of feature j is k stride + j.
  keys.reserve(keys.size() + classes_ * features.size());
  for (std::size_t k = 0; k < classes_; ++k)
    for (std::uint32_t j : features) keys.push_back(static_cast<std::uint32_t>(k * stride_ + j));
  return true;
}

template <class U>
void SoftmaxModel::logits(const float* W, const float* bias, RowView x, float* out) const {
  if (x.dense()) {  // all classes in one pass over x (every mode reads W this way)
    if (x.bytes)
      detail::dense_multi_dot_shared(W, stride_, classes_, x.bytes, x.nnz, out);
    else
      detail::dense_multi_dot_shared(W, stride_, classes_, x.value, x.nnz, out);
    if (bias)
      for (std::size_t k = 0; k < classes_; ++k) out[k] += U::read(bias + k);
    return;
  }
  for (std::size_t k = 0; k < classes_; ++k) out[k] = bias ? U::read(bias + k) : 0.f;
  for (std::uint32_t j = 0; j < x.nnz; ++j) {
    const float* col = W + x.index[j];
    for (std::size_t k = 0; k < classes_; ++k) out[k] += U::read(col + k * stride_) * x.value[j];
  }
}

float SoftmaxModel::softmax_loss(float* z, std::size_t target) const {
  const float m = *std::max_element(z, z + classes_);
  // -log p[target] = log sum_k exp(z_k - m) - (z_target - m): finite even where
  // exp(z_target - m) underflows to 0 (a confidently wrong prediction).
  const float zt = z[target] - m;
  float sum = 0;
  for (std::size_t k = 0; k < classes_; ++k) sum += (z[k] = std::exp(z[k] - m));
  for (std::size_t k = 0; k < classes_; ++k) z[k] /= sum;
  return std::log(sum) - zt;
}

template <class U>
double SoftmaxModel::step(const Batch& b, const ParamSet& p, float lr) {
  float* W = p.data(0);
  float* bias = options_.bias ? p.data(1) : nullptr;
  const std::size_t K = classes_;
  scratch_.resize(b.size * K);
  double total = 0;
  // Forward pass for the whole batch at the weights as read now.
  for (std::size_t i = 0; i < b.size; ++i) {
    float* z = scratch_.data() + i * K;
    if (i + 2 < b.size) prefetch_row(*b.data, b.rows[i + 2]);  // rows 0, 1: the step loop
    logits<U>(W, bias, b.row(i), z);
    const auto y = static_cast<std::size_t>(b.target(i));
    total += softmax_loss(z, y);
    z[y] -= 1;  // z now holds dloss/dlogits
  }
  const float inv = 1 / static_cast<float>(b.size);
  const bool dense = b.size > 0 && b.row(0).dense();
  if (dense) {
    // The batch's gradient is the outer product sum_i g_i x_i^T: with SGD one pass
    // over W (dense_outer_update_shared, U::descend_block) instead of one axpy per
    // class and example. Rows are all floats or all bytes (one dataset).
    const bool bytes = b.row(0).bytes != nullptr;
    const std::size_t n = b.row(0).nnz;
    rows_.resize(b.size);
    byte_rows_.resize(bytes ? b.size : 0);
    for (std::size_t i = 0; i < b.size; ++i) {
      if (bytes)
        byte_rows_[i] = b.row(i).bytes;
      else
        rows_[i] = b.row(i).value;
    }
    if (options_.l2 != 0)
      for (std::size_t k = 0; k < K; ++k)
        U::descend_axpy(p[0], k * stride_, options_.l2, W + k * stride_, features_, lr);
    // The gradient's block: K rows of the features, stride_ apart; alpha * G is the
    // outer product of alpha * scratch_ (the classes' dloss/dlogits) with the rows.
    U::descend_block(p[0], Block{0, K, features_, stride_}, inv, 0.f, lr,
                     [&](float* dst, float alpha, bool overwrite, bool) {
                       const float* coeff = scratch_.data();
                       if (alpha != 1) {
                         coeff_.resize(b.size * K);
                         for (std::size_t j = 0; j < coeff_.size(); ++j)
                           coeff_[j] = alpha * scratch_[j];
                         coeff = coeff_.data();
                       }
                       if (overwrite) std::fill(dst, dst + K * stride_, 0.f);
                       if (bytes)
                         detail::dense_outer_update_shared(dst, stride_, K, coeff, K,
                                                           byte_rows_.data(), b.size, n);
                       else
                         detail::dense_outer_update_shared(dst, stride_, K, coeff, K,
                                                           rows_.data(), b.size, n);
                     });
  } else {
    for (std::size_t i = 0; i < b.size; ++i) {
      const RowView x = b.row(i);  // sparse: row_descend reads x.value
      const float* g = scratch_.data() + i * K;
      for (std::size_t k = 0; k < K; ++k)
        row_descend<U>(p[0], k * stride_, g[k] * inv, options_.l2 * inv, x, lr);
    }
  }
  if (bias) {
    for (std::size_t k = 0; k < K; ++k) {
      float s = 0;
      for (std::size_t i = 0; i < b.size; ++i) s += scratch_[i * K + k];
      U::descend(p[1], k, s * inv, lr);
    }
  }
  return total;
}

void SoftmaxModel::predict(const ParamSet& p, RowView x, float target, double& loss,
                           bool& correct) const {
  std::vector<float> z(classes_);
  logits<SerialUpdate>(p.data(0), options_.bias ? p.data(1) : nullptr, x, z.data());
  const auto best = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
  const auto y = static_cast<std::size_t>(target);
  loss = softmax_loss(z.data(), y);
  correct = best == y;
}

void SoftmaxModel::predict_rows(const ParamSet& p, std::span<const RowView> rows,
                                float* out) const {
  for (const RowView& x : rows) {
    logits<SerialUpdate>(p.data(0), options_.bias ? p.data(1) : nullptr, x, out);
    const float m = *std::max_element(out, out + classes_);
    float sum = 0;
    for (std::size_t k = 0; k < classes_; ++k) sum += (out[k] = std::exp(out[k] - m));
    for (std::size_t k = 0; k < classes_; ++k) out[k] /= sum;
    out += classes_;
  }
}

HOGWILD_INSTANTIATE_STEP(SoftmaxModel);

}  // namespace hogwild
