// The MLP's batch as matrix products. Activations are kept transposed (units x
// batch), so every product has the weights as its "A" operand and the small
// batch-wide matrix as "B" (src/kernels/gemm.hpp, oneDNN):
//   forward    Z_l   = W_l · H_l            (out x B)
//   gradient   dW_l  = D_l · H_l^T          (out x in)
//   backprop   D_l-1 = (W_l^T · D_l) ⊙ [H_l > 0]
// With --matmul-precision bf16 the same products take bf16 operands (oneDNN on
// AVX512-BF16), or, where the CPU has the AMX tile unit, run as step_amx() forms
// them (src/kernels/gemm_bf16.hpp).
#include "hogwild/models/mlp.hpp"

#include <algorithm>
#include <cmath>

#include "hogwild/error.hpp"
#include "models/batch_features.hpp"
#include "hogwild/optimizer.hpp"
#include "kernels/dense_layer.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

namespace hogwild {

namespace {

using kernels::Bf16Matrix;
using kernels::Matrix;

std::ptrdiff_t sd(std::size_t s) { return static_cast<std::ptrdiff_t>(s); }

// "W1", "b1", ... (appending, not "W" + std::to_string: GCC 12 warns falsely on that).
std::string tensor_name(char what, std::size_t layer) {
  std::string name(1, what);
  name += std::to_string(layer + 1);
  return name;
}

constexpr std::size_t kEvalBatch = 256;  // rows per forward pass in evaluate()

}  // namespace

MlpModel::MlpModel(const ModelOptions& options) : options_(options) {
  if (options_.hidden.empty())
    throw ConfigError("mlp needs at least one hidden layer (e.g. --hidden 256,128)");
  for (std::size_t h : options_.hidden)
    if (h == 0) throw ConfigError("mlp hidden layer widths must be positive");
  if (options_.matmul == MatmulPrecision::bf16 && !kernels::bf16::available() &&
      !kernels::bf16_supported())
    throw ConfigError("--matmul-precision bf16 cannot run here: " +
                      kernels::bf16::unavailable_reason() + "; " +
                      kernels::bf16_unsupported_reason() + "; use fp32");
}

void MlpModel::configure(const Problem& problem) {
  require_feature_rows(std::string("mlp"), problem);
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
    t.push_back({tensor_name('W', l), out * in, {Init::normal, scale}, Dtype::f32, {out, in}});
    if (options_.bias) t.push_back({tensor_name('b', l), out, {}});
  }
  return t;
}

bool MlpModel::touched(std::size_t tensor, const Batch& b,
                       std::vector<std::uint32_t>& keys) const {
  const std::size_t in = widths_[0], out = widths_[1];
  std::vector<std::uint32_t> features;
  if (tensor != tensor_of(0) || options_.l2 != 0 || !detail::batch_features(b, in, features))
    return false;
  HOGWILD_ENFORCE_LE(in * out, std::size_t{UINT32_MAX});
  // W_0 is out x in, row-major: column j is j, in + j, 2 in + j, ...
  keys.reserve(keys.size() + out * features.size());
  for (std::size_t o = 0; o < out; ++o)
    for (std::uint32_t j : features) keys.push_back(static_cast<std::uint32_t>(o * in + j));
  return true;
}

template <class RowAt>
void MlpModel::load_inputs(RowAt row_at, std::size_t count, Activations& a) const {
  const std::size_t in = widths_[0];
  a.batch = count;
  a.act.resize(layers() + 1);
  auto& x = a.act[0];
  x.resize(in * count);
  // Row by row (count x in): contiguous, so a byte row widens in vector instructions;
  // the products read it transposed through their strides.
  // The rows are random reads from the data set; fetch a few ahead.
  constexpr std::size_t kAhead = 3;
  auto prefetch = [&](std::size_t b) {
    const RowView r = row_at(b);
    const char* p = r.bytes ? reinterpret_cast<const char*>(r.bytes)
                            : reinterpret_cast<const char*>(r.value);
    const std::size_t bytes = r.bytes ? r.nnz : r.nnz * sizeof(float);
    for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
    if (!r.bytes && !r.dense())
      for (std::size_t o = 0; o < r.nnz * sizeof(std::uint32_t); o += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(r.index) + o);
  };
  for (std::size_t b = 0; b < std::min(kAhead, count); ++b) prefetch(b);
  for (std::size_t b = 0; b < count; ++b) {
    if (b + kAhead < count) prefetch(b + kAhead);
    const RowView r = row_at(b);
    float* xb = x.data() + b * in;
    std::size_t filled = 0;
    if (r.bytes) {  // a dense_u8 row
      filled = std::min<std::size_t>(in, r.nnz);
      kernels::widen_bytes(xb, r.bytes, filled);
    } else if (r.dense()) {
      filled = std::min<std::size_t>(in, r.nnz);
      std::copy_n(r.value, filled, xb);
    } else {
      std::fill(xb, xb + in, 0.f);
      for (std::uint32_t j = 0; j < r.nnz; ++j)
        if (r.index[j] < in) xb[r.index[j]] = r.value[j];
      filled = in;
    }
    std::fill(xb + filled, xb + in, 0.f);
  }
}

// Layer l's input as the products' operands: H_l (in x B) and H_l^T (B x in). The
// hidden activations are stored units x batch, the input rows batch x units.
MlpModel::Strides MlpModel::input(std::size_t l, std::size_t batch, bool transposed) const {
  const auto in = sd(widths_[l]), B = sd(batch);
  if (l == 0) return transposed ? Strides{in, 1} : Strides{1, in};
  return transposed ? Strides{1, B} : Strides{B, 1};
}

void MlpModel::forward(const std::vector<const float*>& W, const std::vector<const float*>& bias,
                       Activations& a, const std::vector<const std::uint16_t*>* w16) const {
  const std::size_t B = a.batch;
  if (w16) a.act16.resize(layers());
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    auto& z = a.act[l + 1];
    z.resize(out * B);
    const Strides h = input(l, B, false);
    if (w16) {
      auto& h16 = a.act16[l];
      h16.resize(in * B);
      kernels::to_bf16(a.act[l].data(), in * B, h16.data());
      kernels::gemm(out, B, in, Bf16Matrix{(*w16)[l], sd(in), 1}, Bf16Matrix{h16.data(), h.rs, h.cs},
                    false, z.data(), B);
    } else {
      kernels::gemm(out, B, in, Matrix{W[l], sd(in), 1}, Matrix{a.act[l].data(), h.rs, h.cs}, false,
                    z.data(), B);
    }
    activate(l, z.data(), B, bias[l]);
  }
}

void MlpModel::activate(std::size_t l, float* z, std::size_t B, const float* bias) const {
  const bool relu = l + 1 < layers();
  for (std::size_t j = 0; j < widths_[l + 1]; ++j) {
    const float bj = bias ? bias[j] : 0.f;
    float* row = z + j * B;
    for (std::size_t b = 0; b < B; ++b) {
      const float v = row[b] + bj;
      row[b] = relu ? std::max(v, 0.f) : v;
    }
  }
}

double MlpModel::top_delta(float* top, const Batch& batch) const {
  const std::size_t B = batch.size;
  const double loss = softmax_columns(top, B, batch.targets, batch.rows, nullptr);
  for (std::size_t i = 0; i < B; ++i) top[static_cast<std::size_t>(batch.target(i)) * B + i] -= 1;
  return loss;
}

template <class U>
std::vector<const float*> MlpModel::read_biases(const ParamSet& p, bool shared) {
  const std::size_t L = layers();
  std::vector<const float*> b(L);
  bias_copy_.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    b[l] = bias(p, l);
    if (shared && b[l]) {  // other workers write them: read each float once, whole
      bias_copy_[l].resize(widths_[l + 1]);
      for (std::size_t j = 0; j < widths_[l + 1]; ++j) bias_copy_[l][j] = U::read(b[l] + j);
      b[l] = bias_copy_[l].data();
    }
  }
  return b;
}

template <class U>
void MlpModel::descend_bias(const ParamSet& p, std::size_t l, const float* d, std::size_t B,
                            float lr) {
  if (!options_.bias) return;
  const std::size_t out = widths_[l + 1];
  bias_grad_.assign(out, 0.f);
  for (std::size_t j = 0; j < out; ++j)
    for (std::size_t i = 0; i < B; ++i) bias_grad_[j] += d[j * B + i];
  U::descend_axpy(p[tensor_of(l) + 1], 0, 1 / static_cast<float>(B), bias_grad_.data(), out, lr);
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
  const bool bf16 = options_.matmul == MatmulPrecision::bf16;
  if (bf16 && kernels::bf16::available()) return step_amx<U>(batch, p, lr);
  const std::size_t L = layers(), B = batch.size;
  // How the products meet the weights. oneDNN reads its operands with loads of its
  // own, so where other workers write the weights meanwhile (hogwild, atomic) each W
  // is copied once per batch in whole lanes (THE INTENDED RACE), and a weight another
  // worker changes mid-batch is one more stale read; otherwise (serial, lock, a
  // worker's own replica, the gradient path) the products read W in place. bf16
  // rounds a copy of every W either way, reading it in whole lanes.
  const bool live = U::live(p);
  std::vector<const float*> W(L);
  std::vector<const std::uint16_t*> W16(L);
  w_copy_.resize(L);
  w16_.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t n = widths_[l] * widths_[l + 1];
    W[l] = weights(p, l);
    if (bf16) {
      w16_[l].resize(n);
      kernels::to_bf16(W[l], n, w16_[l].data());
      W16[l] = w16_[l].data();
    } else if (live) {
      w_copy_[l].resize(n);
      kernels::copy_from_shared(w_copy_[l].data(), W[l], n);
      W[l] = w_copy_[l].data();
    }
  }
  const auto bias_in = read_biases<U>(p, live);
  load_inputs([&](std::size_t i) { return batch.row(i); }, B, work_);
  forward(W, bias_in, work_, bf16 ? &W16 : nullptr);
  float* top = work_.act[L].data();
  const double loss = top_delta(top, batch);

  // Backward, top layer first; top now holds dloss/dlogits (out x B). Gradients
  // go to the optimiser as inv * (summed gradient + B * l2 * w) = mean + l2 * w.
  const float inv = 1 / static_cast<float>(B);
  const float l2 = options_.l2 * static_cast<float>(B);
  delta_.resize(L);
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    const float* h = work_.act[l].data();
    const float* d = l + 1 == L ? top : delta_[l].data();
    if (bf16) {  // D rounded once, for both of its products
      d16_.resize(out * B);
      kernels::to_bf16(d, out * B, d16_.data());
    }
    if (l > 0) {  // before the update, which changes W_l
      auto& below = delta_[l - 1];
      below.resize(in * B);
      if (bf16) {
        kernels::gemm(in, B, out, Bf16Matrix{W16[l], 1, sd(in)}, Bf16Matrix{d16_.data(), sd(B), 1},
                      false, below.data(), B);
      } else {
        kernels::gemm(in, B, out, Matrix{W[l], 1, sd(in)}, Matrix{d, sd(B), 1}, false,
                      below.data(), B);
      }
      // Branch-free (a select, vectorised): which units are active is data, and a
      // branch per unit mispredicted on about half of them.
      float* bl = below.data();
      for (std::size_t i = 0; i < in * B; ++i) bl[i] = h[i] > 0 ? bl[i] : 0.f;
    }
    // The weight gradient inv * (D·H^T + B l2 W): the update interface decides where
    // the product goes (with SGD straight into W, scaled by -lr/B; otherwise into
    // a gradient block). In fp32 alpha scales D before the product, so that the
    // product's sum is added to W as one rounded value however it gets there; in
    // bf16 it scales the sums (rounding alpha D would make each mode's step round
    // differently). oneDNN writes C with stores of its own: for a live W it writes a
    // private buffer, which dense_axpy_shared adds in whole lanes (THE INTENDED
    // RACE's write half).
    const Strides ht = input(l, B, true);
    U::descend_block(p[tensor_of(l)], Block{0, out, in, in}, inv, l2, lr,
                     [&](float* dst, float alpha, bool overwrite, bool live_dst) {
                       float* c = dst;
                       if (live_dst) {
                         grad_.resize(out * in);
                         c = grad_.data();
                       }
                       const bool accumulate = !overwrite && !live_dst;
                       float add = 1;  // what c is added to a live W times
                       if (bf16) {
                         kernels::gemm(out, in, B, Bf16Matrix{d16_.data(), sd(B), 1},
                                       Bf16Matrix{work_.act16[l].data(), ht.rs, ht.cs}, accumulate,
                                       c, in, live_dst ? 1.f : alpha);
                         add = alpha;
                       } else {
                         const float* a = d;
                         if (alpha != 1) {
                           scaled_.resize(out * B);
                           for (std::size_t i = 0; i < out * B; ++i) scaled_[i] = alpha * d[i];
                           a = scaled_.data();
                         }
                         kernels::gemm(out, in, B, Matrix{a, sd(B), 1}, Matrix{h, ht.rs, ht.cs},
                                       accumulate, c, in);
                       }
                       if (live_dst) detail::dense_axpy_shared(dst, add, c, out * in);
                     });
    descend_bias<U>(p, l, d, B, lr);
  }
  return loss;
}

// The bf16 step on the AMX tile unit. Every product is C (m x n) = A (m x k) ·
// B (k x n) on packed operands; a live W is packed straight from the shared tensor in
// whole lanes (kernels::bf16, its live forms), so hogwild needs no private copy:
//   forward    Z_l       = W_l · H_l           A = W_l (live),  B = H_l
//   backprop   D_l-1^T   = D_l^T · W_l         A = D_l^T,       B = W_l (live)
//   gradient   W_l      += -lr/B · D_l · H_l^T  A = D_l,         B = H_l^T
// The backprop product is batch-major and its epilogue stores it transposed: W_l as
// B needs only row pairs of the live tensor, not a transpose of it.
template <class U>
double MlpModel::step_amx(const Batch& batch, const ParamSet& p, float lr) {
  namespace bf = kernels::bf16;
  const std::size_t L = layers(), B = batch.size;
  // W written by other workers while this one reads it (hogwild, atomic).
  const bool shared = U::live(p);
  const auto bias_in = read_biases<U>(p, shared);
  // Byte rows of the full width (images) are packed straight from the data set,
  // with no float copy of the batch; other rows go through load_inputs.
  byte_rows_.resize(B);
  bool bytes = true;
  for (std::size_t i = 0; i < B && bytes; ++i) {
    const RowView r = batch.row(i);
    bytes = r.bytes && r.nnz == widths_[0];
    byte_rows_[i] = r.bytes;
  }
  if (bytes) {
    for (const std::uint8_t* r : byte_rows_)  // random rows: fetch them all first
      for (std::size_t o = 0; o < widths_[0]; o += 64) __builtin_prefetch(r + o);
    work_.batch = B;
    work_.act.resize(L + 1);
  } else {
    load_inputs([&](std::size_t i) { return batch.row(i); }, B, work_);
  }
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    bf::pack_a(out, in, weights(p, l), sd(in), 1, pack_a_, shared);
    if (l == 0 && bytes) {
      bf::pack_b_byte_columns(in, B, byte_rows_.data(), pack_b_);
    } else {
      const Strides h = input(l, B, false);
      bf::pack_b(in, B, work_.act[l].data(), h.rs, h.cs, pack_b_);
    }
    auto& z = work_.act[l + 1];
    z.resize(out * B);
    bf::gemm(out, B, in, pack_a_.data(), pack_b_.data(), z.data(), B);
    activate(l, z.data(), B, bias_in[l]);
  }
  float* top = work_.act[L].data();
  const double loss = top_delta(top, batch);

  const float inv = 1 / static_cast<float>(B);
  const float l2 = options_.l2 * static_cast<float>(B);
  delta_.resize(L);
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    const float* h = work_.act[l].data();
    const float* d = l + 1 == L ? top : delta_[l].data();
    float* w = weights(p, l);
    if (l > 0) {  // before the update, which changes W_l in place
      bf::pack_a(B, out, d, 1, sd(B), pack_a_);
      bf::pack_b(out, in, w, sd(in), 1, pack_b_, shared);
      auto& below = delta_[l - 1];
      below.resize(in * B);
      bf::gemm(B, in, out, pack_a_.data(), pack_b_.data(), below.data(), B,
               bf::Epilogue::store_transposed);
      float* bl = below.data();
      for (std::size_t i = 0; i < in * B; ++i) bl[i] = h[i] > 0 ? bl[i] : 0.f;
    }
    bf::pack_a(out, B, d, sd(B), 1, pack_a_);
    if (l == 0 && bytes) {
      bf::pack_b_byte_rows(B, in, byte_rows_.data(), pack_b_);
    } else {
      const Strides ht = input(l, B, true);
      bf::pack_b(B, in, work_.act[l].data(), ht.rs, ht.cs, pack_b_);
    }
    // The product's epilogue scales it by alpha and adds it in whole lanes (SGD:
    // straight into W), or stores it (a gradient block).
    U::descend_block(p[tensor_of(l)], Block{0, out, in, in}, inv, l2, lr,
                     [&](float* dst, float alpha, bool overwrite, bool) {
                       if (overwrite)
                         bf::gemm(out, in, B, pack_a_.data(), pack_b_.data(), dst, in);
                       else
                         bf::gemm(out, in, B, pack_a_.data(), pack_b_.data(), dst, in,
                                  bf::Epilogue::add_live, alpha);
                     });
    descend_bias<U>(p, l, d, B, lr);
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

Model::StepMemory MlpModel::step_memory(std::size_t batch, bool live) const {
  std::size_t units = 0, weights = 0, largest = 0;
  for (std::size_t l = 0; l < layers(); ++l) {
    units += widths_[l] + widths_[l + 1];  // act[l + 1] and delta, act[0]
    weights += widths_[l] * widths_[l + 1];
    largest = std::max(largest, widths_[l] * widths_[l + 1]);
  }
  const bool bf16 = options_.matmul == MatmulPrecision::bf16;
  // act and delta_, scaled_ (the widest layer), and the weights' copies: fp32 where
  // other workers write them, bf16 always with bf16 products; grad_ for a live W.
  std::size_t floats = batch * units + batch * *std::max_element(widths_.begin(), widths_.end());
  if (live) floats += weights + largest;
  // oneDNN's in each process that runs the products: its generated kernels, its
  // primitives and its OpenMP threads (measured: 4.2 MiB a worker on 2 cores); and
  // mapped while a product runs, its packed operands (a worker's peak address space
  // exceeded the rest by 13, 18 and 25 to 37 MiB with 1024-, 2048- and 4096-unit
  // layers).
  constexpr std::size_t kLibraryBytes = std::size_t{9} << 19, kLibraryMapped = std::size_t{16} << 20;
  const std::size_t resident =
      floats * sizeof(float) + (bf16 ? (weights + batch * units) * sizeof(std::uint16_t) : 0) +
      kLibraryBytes;
  return {resident, resident + kLibraryMapped + largest * sizeof(float) / 2};
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

void MlpModel::predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const {
  std::vector<const float*> W(layers()), b(layers());
  for (std::size_t l = 0; l < layers(); ++l) W[l] = weights(p, l), b[l] = bias(p, l);
  const std::size_t K = widths_.back();
  Activations a;
  for (std::size_t r0 = 0; r0 < rows.size(); r0 += kEvalBatch) {
    const std::size_t count = std::min(kEvalBatch, rows.size() - r0);
    load_inputs([&](std::size_t i) { return rows[r0 + i]; }, count, a);
    forward(W, b, a);
    const float* z = a.act.back().data();  // K x count
    for (std::size_t i = 0; i < count; ++i, out += K) {
      float m = z[i];
      for (std::size_t k = 1; k < K; ++k) m = std::max(m, z[k * count + i]);
      float sum = 0;
      for (std::size_t k = 0; k < K; ++k) sum += (out[k] = std::exp(z[k * count + i] - m));
      for (std::size_t k = 0; k < K; ++k) out[k] /= sum;
    }
  }
}

HOGWILD_INSTANTIATE_STEP(MlpModel);

}  // namespace hogwild
