#include "hogwild/models/linear.hpp"

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
  features_ = problem.features;
  classification_ = loss_ != LinearLoss::squared || problem.classes == 2;
}

std::vector<TensorSpec> LinearModel::parameters() const {
  std::vector<TensorSpec> t{{"w", features_, {}}};
  if (options_.bias) t.push_back({"b", 1, {}});
  return t;
}

void LinearModel::loss_and_slope(float z, float y, float& loss, float& slope) const noexcept {
  switch (loss_) {
    case LinearLoss::logistic: {
      // y in {0,1}: loss = log(1 + exp(-s z)), s = 2y - 1, computed without overflow.
      // One exp serves both: e = exp(-|z|), sigmoid(z) = 1/(1+e) or e/(1+e).
      const float sz = (2 * y - 1) * z;
      const float e = std::exp(-std::fabs(z));
      loss = std::log1p(e) + (sz < 0 ? -sz : 0.f);
      slope = (z >= 0 ? 1.f : e) / (1 + e) - y;
      return;
    }
    case LinearLoss::hinge: {
      const float s = 2 * y - 1;
      const float m = 1 - s * z;
      loss = m > 0 ? m : 0;
      slope = m > 0 ? -s : 0;
      return;
    }
    case LinearLoss::squared: {
      const float r = z - target(y);
      loss = 0.5f * r * r;
      slope = r;
      return;
    }
  }
}

template <class U>
void LinearModel::begin_epoch(const EpochTask& t) {
  if constexpr (U::mode == Mode::serial || U::optimizer != Optimizer::sgd) return;
  if (options_.hot_k == 0 || hot_selected_) return;
  hot_selected_ = true;  // once per worker: its rows are the same set every epoch
  hot_.select(*t.data, t.rows, features_, options_.hot_k);
}

template <class U>
void LinearModel::end_epoch(const EpochTask& t) {
  if (!hot_.active()) return;
  float* bias = options_.bias ? t.params.data(1) : nullptr;
  if constexpr (U::locks_batches) {
    RobustLock guard(*t.mutex);
    hot_.flush<U>(t.params.data(0), bias);
  } else {
    hot_.flush<U>(t.params.data(0), bias);
  }
}

// step() with the hot coordinates in the worker's private buffer: a read sees the
// shared value plus the worker's own pending delta (delta()[0] is 0 for every cold
// feature, so no branch), and an update of a hot coordinate stays private until
// the flush every hot_flush examples.
template <class U>
double LinearModel::step_hot(const Batch& b, const ParamSet& p, float lr) {
  float* wm = p.data(0);
  const float* w = wm;
  float* bias = options_.bias ? p.data(1) : nullptr;
  const std::uint8_t* slot = hot_.slots();
  float* delta = hot_.delta();
  const float inv = 1 / static_cast<float>(b.size);
  const float l2 = options_.l2 * inv;
  slopes_.resize(b.size);
  double total = 0;
  for (std::size_t i = 0; i < b.size; ++i) {
    const RowView x = b.row(i);
    float z = bias ? U::read(bias) + hot_.bias_delta : 0.f;
    for (std::uint32_t k = 0; k < x.nnz; ++k)
      z += (U::read(w + x.index[k]) + delta[slot[x.index[k]]]) * x.value[k];
    float loss;
    loss_and_slope(z, b.target(i), loss, slopes_[i]);
    total += loss;
  }
  // Where an update goes, without a branch: a third of a row's features may be
  // hot, in no predictable order. base[1] + slot for a hot feature, base[0] + j for
  // a cold one. The add is Sgd's descend (begin_epoch admits only Sgd).
  float* const base[2] = {wm, delta};
  for (std::size_t i = 0; i < b.size; ++i) {
    const RowView x = b.row(i);
    const float a = slopes_[i] * inv;
    for (std::uint32_t k = 0; k < x.nnz; ++k) {
      const std::uint32_t j = x.index[k];
      const std::uint32_t s = slot[j];
      const std::uint32_t hot = s != 0;
      const std::uint32_t at = j ^ ((j ^ s) & (0u - hot));  // hot ? s : j
      float g = a * x.value[k];
      if (l2 != 0) g += l2 * (U::read(w + j) + delta[s]);
      U::add(base[hot] + at, -lr * g);
    }
    hot_.bias_delta -= lr * a;
  }
  if ((hot_.pending += b.size) >= options_.hot_flush) hot_.flush<U>(p.data(0), bias);
  return total;
}

template <class U>
double LinearModel::step(const Batch& b, const ParamSet& p, float lr) {
  if (U::mode != Mode::serial && hot_.active()) return step_hot<U>(b, p, lr);
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

void LinearModel::predict(const ParamSet& p, RowView x, float target_value, double& loss,
                          bool& correct) const {
  const float z = row_dot<SerialUpdate>(p.data(0), x) + (options_.bias ? *p.data(1) : 0.f);
  float l, slope;
  loss_and_slope(z, target_value, l, slope);
  loss = l;
  correct = classification_ && ((z > 0) == (target_value > 0.5f));
}

HOGWILD_INSTANTIATE_STEP(LinearModel);
template void LinearModel::begin_epoch<Update<SerialUpdate, Sgd>>(const EpochTask&);
template void LinearModel::end_epoch<Update<SerialUpdate, Sgd>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<SerialUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::end_epoch<Update<SerialUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<HogwildUpdate, Sgd>>(const EpochTask&);
template void LinearModel::end_epoch<Update<HogwildUpdate, Sgd>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<HogwildUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::end_epoch<Update<HogwildUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<AtomicUpdate, Sgd>>(const EpochTask&);
template void LinearModel::end_epoch<Update<AtomicUpdate, Sgd>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<AtomicUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::end_epoch<Update<AtomicUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<LockUpdate, Sgd>>(const EpochTask&);
template void LinearModel::end_epoch<Update<LockUpdate, Sgd>>(const EpochTask&);
template void LinearModel::begin_epoch<Update<LockUpdate, AdaGrad>>(const EpochTask&);
template void LinearModel::end_epoch<Update<LockUpdate, AdaGrad>>(const EpochTask&);

}  // namespace hogwild
