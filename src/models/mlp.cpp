// The MLP's batch as matrix products. Activations are kept transposed (units x
// batch), so every product has the weights as its in-place "A" operand and the
// small batch-wide matrix as the packed "B" operand (src/kernels/gemm.cpp):
//   forward    Z_l   = W_l · H_l            (out x B)
//   gradient   dW_l  = D_l · H_l^T          (out x in)
//   backprop   D_l-1 = (W_l^T · D_l) ⊙ [H_l > 0]
#include "hogwild/models/mlp.hpp"

#include <algorithm>
#include <cmath>

#include "hogwild/error.hpp"
#include "hogwild/optimizer.hpp"
#include "kernels/gemm.hpp"

namespace hogwild {

namespace {

using kernels::Matrix;

std::ptrdiff_t sd(std::size_t s) { return static_cast<std::ptrdiff_t>(s); }

// "W1", "b1", ... (appending, not "W" + std::to_string: GCC 12 warns falsely on that).
std::string tensor_name(char what, std::size_t layer) {
  std::string name(1, what);
  name += std::to_string(layer + 1);
  return name;
}

constexpr std::size_t kEvalBatch = 256;  // rows per forward pass in evaluate()
constexpr std::size_t kLoadBlock = 64;   // input features transposed per block (stays in L1)

}  // namespace

MlpModel::MlpModel(const ModelOptions& options) : options_(options) {
  if (options_.hidden.empty())
    throw ConfigError("mlp needs at least one hidden layer (e.g. --hidden 256,128)");
  for (std::size_t h : options_.hidden)
    if (h == 0) throw ConfigError("mlp hidden layer widths must be positive");
}

void MlpModel::configure(const Problem& problem) {
  if (problem.classes < 2)
    throw ConfigError("mlp needs at least 2 classes in the training labels, found " +
                      std::to_string(problem.classes));
  widths_.assign(1, problem.features);
  widths_.insert(widths_.end(), options_.hidden.begin(), options_.hidden.end());
  widths_.push_back(problem.classes);
}

std::vector<TensorSpec> MlpModel::parameters() const {
  std::vector<TensorSpec> t;
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    // He et al. (2015) for layers followed by a ReLU; LeCun's 1/in for the logits.
    const double gain = l + 1 < layers() ? 2.0 : 1.0;
    const auto scale = static_cast<float>(std::sqrt(gain / static_cast<double>(in)));
    t.push_back({tensor_name('W', l), out * in, {Init::normal, scale}});
    if (options_.bias) t.push_back({tensor_name('b', l), out, {}});
  }
  return t;
}

template <class RowAt>
void MlpModel::load_inputs(RowAt row_at, std::size_t count, Activations& a) const {
  const std::size_t in = widths_[0];
  a.batch = count;
  a.act.resize(layers() + 1);
  auto& x = a.act[0];
  x.assign(in * count, 0.f);
  // Transposed in blocks of features so the written lines stay in L1.
  for (std::size_t k0 = 0; k0 < in; k0 += kLoadBlock) {
    const std::size_t k1 = std::min(in, k0 + kLoadBlock);
    for (std::size_t b = 0; b < count; ++b) {
      const RowView r = row_at(b);
      if (r.bytes) {  // a dense_u8 row
        for (std::size_t k = k0; k < std::min<std::size_t>(k1, r.nnz); ++k)
          x[k * count + b] = byte_value(r.bytes[k]);
      } else if (r.dense()) {
        for (std::size_t k = k0; k < std::min<std::size_t>(k1, r.nnz); ++k)
          x[k * count + b] = r.value[k];
      } else if (k0 == 0) {
        for (std::uint32_t j = 0; j < r.nnz; ++j)
          if (r.index[j] < in) x[r.index[j] * count + b] = r.value[j];
      }
    }
  }
}

void MlpModel::forward(const std::vector<const float*>& W, const std::vector<const float*>& bias,
                       Activations& a) const {
  const std::size_t B = a.batch;
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    auto& z = a.act[l + 1];
    z.resize(out * B);
    kernels::gemm(out, B, in, Matrix{W[l], sd(in), 1}, Matrix{a.act[l].data(), sd(B), 1},
                  z.data(), B, false);
    const bool relu = l + 1 < layers();
    for (std::size_t j = 0; j < out; ++j) {
      const float bj = bias[l] ? bias[l][j] : 0.f;
      float* row = z.data() + j * B;
      for (std::size_t b = 0; b < B; ++b) {
        const float v = row[b] + bj;
        row[b] = relu ? std::max(v, 0.f) : v;
      }
    }
  }
}

double MlpModel::softmax_columns(float* z, std::size_t B, const float* targets,
                                 const std::uint32_t* rows, std::size_t* correct) const {
  const std::size_t K = widths_.back();
  double loss = 0;
  for (std::size_t b = 0; b < B; ++b) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < K; ++k)
      if (z[k * B + b] > z[best * B + b]) best = k;
    const float m = z[best * B + b];
    const auto y = static_cast<std::size_t>(targets[rows[b]]);
    const float zy = z[y * B + b] - m;  // as softmax.cpp: finite where exp(zy) underflows
    float sum = 0;
    for (std::size_t k = 0; k < K; ++k) sum += (z[k * B + b] = std::exp(z[k * B + b] - m));
    loss += std::log(sum) - zy;
    for (std::size_t k = 0; k < K; ++k) z[k * B + b] /= sum;
    if (correct) *correct += best == y;
  }
  return loss;
}

template <class U>
double MlpModel::step(const Batch& batch, const ParamSet& p, float lr) {
  const std::size_t L = layers(), B = batch.size;
  // Serial and lock modes own the weights for the whole batch and compute on them in
  // place; the others take a private copy once per batch (whole-lane loads, see
  // kernels::copy_from_shared), so the products never read floats being written.
  constexpr bool copy = !(U::mode == Mode::serial || U::locks_batches);
  std::vector<const float*> W(L), bias_in(L);
  copy_.resize(L);
  bias_copy_.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    W[l] = weights(p, l);
    bias_in[l] = bias(p, l);
    if constexpr (copy) {
      const std::size_t out = widths_[l + 1];
      copy_[l].resize(out * widths_[l]);
      kernels::copy_from_shared(copy_[l].data(), W[l], copy_[l].size());
      W[l] = copy_[l].data();
      if (bias_in[l]) {
        bias_copy_[l].resize(out);
        for (std::size_t j = 0; j < out; ++j) bias_copy_[l][j] = U::read(bias_in[l] + j);
        bias_in[l] = bias_copy_[l].data();
      }
    }
  }
  load_inputs([&](std::size_t i) { return batch.row(i); }, B, work_);
  forward(W, bias_in, work_);
  float* top = work_.act[L].data();
  const double loss = softmax_columns(top, B, batch.targets, batch.rows, nullptr);
  for (std::size_t i = 0; i < B; ++i) top[static_cast<std::size_t>(batch.target(i)) * B + i] -= 1;

  // Backward, top layer first; top now holds dloss/dlogits (out x B). Gradients
  // go to the optimiser as inv * (summed gradient + B * l2 * w) = mean + l2 * w.
  const float inv = 1 / static_cast<float>(B);
  const float l2 = options_.l2 * static_cast<float>(B);
  delta_.resize(L);
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    const float* h = work_.act[l].data();
    const float* d = l + 1 == L ? top : delta_[l].data();
    grad_.resize(out * in);
    kernels::gemm(out, in, B, Matrix{d, sd(B), 1}, Matrix{h, 1, sd(B)}, grad_.data(), in, false);
    if (l > 0) {  // before the update: serial mode reads W_l in place
      auto& below = delta_[l - 1];
      below.resize(in * B);
      kernels::gemm(in, B, out, Matrix{W[l], 1, sd(in)}, Matrix{d, sd(B), 1}, below.data(), B,
                    false);
      for (std::size_t i = 0; i < in * B; ++i)
        if (!(h[i] > 0)) below[i] = 0;
    }
    if (l2 != 0)
      for (std::size_t i = 0; i < out * in; ++i) grad_[i] += l2 * W[l][i];
    U::descend_axpy(p[tensor_of(l)], 0, inv, grad_.data(), out * in, lr);
    if (options_.bias) {
      bias_grad_.assign(out, 0.f);
      for (std::size_t j = 0; j < out; ++j)
        for (std::size_t i = 0; i < B; ++i) bias_grad_[j] += d[j * B + i];
      U::descend_axpy(p[tensor_of(l) + 1], 0, inv, bias_grad_.data(), out, lr);
    }
  }
  return loss;
}

void MlpModel::predict(const ParamSet& p, RowView x, float target, double& loss,
                       bool& correct) const {
  std::vector<const float*> W(layers()), b(layers());
  for (std::size_t l = 0; l < layers(); ++l) W[l] = weights(p, l), b[l] = bias(p, l);
  Activations a;
  load_inputs([&](std::size_t) { return x; }, 1, a);
  forward(W, b, a);
  const std::uint32_t row = 0;
  std::size_t ok = 0;
  loss = softmax_columns(a.act.back().data(), 1, &target, &row, &ok);
  correct = ok == 1;
}

Evaluation MlpModel::evaluate(const ParamSet& params, const Dataset& data,
                              const float* targets) const {
  Evaluation e;
  e.rows = data.rows();
  if (data.rows() == 0) return e;
  std::vector<const float*> W(layers()), b(layers());
  for (std::size_t l = 0; l < layers(); ++l) W[l] = weights(params, l), b[l] = bias(params, l);
  Activations a;
  std::vector<std::uint32_t> rows(kEvalBatch);
  double loss = 0;
  std::size_t correct = 0;
  for (std::size_t r0 = 0; r0 < data.rows(); r0 += kEvalBatch) {
    const std::size_t count = std::min(kEvalBatch, data.rows() - r0);
    for (std::size_t i = 0; i < count; ++i) rows[i] = static_cast<std::uint32_t>(r0 + i);
    load_inputs([&](std::size_t i) { return data.row(rows[i]); }, count, a);
    forward(W, b, a);
    loss += softmax_columns(a.act.back().data(), count, targets, rows.data(), &correct);
  }
  const double n = static_cast<double>(data.rows());
  e.loss = loss / n;
  e.accuracy = static_cast<double>(correct) / n;
  return e;
}

HOGWILD_INSTANTIATE_STEP(MlpModel);

}  // namespace hogwild
