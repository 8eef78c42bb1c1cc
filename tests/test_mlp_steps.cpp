// The MLP's mini-batch sequence on a device (device/mlp_steps.hpp), run on host
// primitives that do what the GPU's kernels and cuBLAS do (column-major SGEMM, the
// modes' steps one thread at a time): the sequence itself — which products, in
// which orientation, with which scale, in which order against the steps — is the
// code the GPU runs, and it must take MlpModel's CPU step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hogwild/gradient.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/update_policy.hpp"
#include "device/mlp_steps.hpp"

using namespace hogwild;
using namespace hogwild::detail;

namespace {

class HostPrimitives final : public MlpPrimitives {
 public:
  int locks = 0, unlocks = 0, snapshots = 0, gathers = 0;

  float* buffer(std::size_t floats) override {
    return buffers_.emplace_back(floats, std::nanf("")).data();
  }
  void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const float* A,
            std::size_t lda, const float* B, std::size_t ldb, float* C,
            std::size_t ldc) override {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < k; ++p)
          s += double(ta ? A[p + i * lda] : A[i + p * lda]) * (tb ? B[j + p * ldb] : B[p + j * ldb]);
        C[i + j * ldc] = static_cast<float>(s);
      }
  }
  void gather(const DeviceRows& rows, const std::uint32_t* order, std::size_t begin,
              std::size_t n, float* X) override {
    ++gathers;
    for (std::size_t b = 0; b < n; ++b) {
      const std::uint32_t r = order[begin + b];
      float* x = X + b * rows.cols;
      if (rows.offsets) {
        std::fill(x, x + rows.cols, 0.f);
        for (std::uint64_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
          x[rows.index[k]] = rows.value[k];
      } else {
        std::copy(rows.value + r * rows.cols, rows.value + (r + 1) * rows.cols, x);
      }
    }
  }
  void bias_act(DeviceAccess, float* Z, const float* bias, std::size_t out, std::size_t n,
                bool relu) override {
    for (std::size_t i = 0; i < out * n; ++i) {
      const float z = Z[i] + (bias ? bias[i % out] : 0.f);
      Z[i] = relu ? std::max(z, 0.f) : z;
    }
  }
  void softmax_top(float* Z, const float* target, const std::uint32_t* order, std::size_t begin,
                   std::size_t K, std::size_t n, double* loss) override {
    for (std::size_t b = 0; b < n; ++b) {
      float* z = Z + b * K;
      const auto y = static_cast<std::size_t>(target[order[begin + b]]);
      const float m = *std::max_element(z, z + K);
      float sum = 0;
      for (std::size_t k = 0; k < K; ++k) sum += std::exp(z[k] - m);
      *loss += std::log(sum) - (z[y] - m);
      for (std::size_t k = 0; k < K; ++k) z[k] = std::exp(z[k] - m) / sum - (k == y ? 1.f : 0.f);
    }
  }
  void relu_mask(float* D, const float* A, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) D[i] = A[i] > 0 ? D[i] : 0.f;
  }
  void snapshot(DeviceAccess, float* dst, const float* src, std::size_t n) override {
    ++snapshots;
    std::copy(src, src + n, dst);
  }
  void dense_descent(DeviceAccess access, const DenseDescent& d) override {
    for (std::size_t i = 0; i < d.n; ++i)
      descend(access, d.w + i, d.state ? d.state + i : nullptr, d.grad ? d.grad + i : nullptr,
              d.adagrad, d.scale * d.G[i] + d.l2 * d.w[i], d.lr);
  }
  void bias_descent(DeviceAccess access, const BiasDescent& d) override {
    for (std::size_t j = 0; j < d.out; ++j) {
      float s = 0;
      for (std::size_t b = 0; b < d.B; ++b) s += d.D[j + b * d.out];
      descend(access, d.b + j, d.state ? d.state + j : nullptr, d.grad ? d.grad + j : nullptr,
              d.adagrad, d.scale * s, d.lr);
    }
  }
  void lock(int*, bool acquire) override { ++(acquire ? locks : unlocks); }

 private:
  // warp.cuh's descend, one thread at a time.
  static void descend(DeviceAccess access, float* w, float* state, float* grad, bool adagrad,
                      float g, float lr) {
    if (access == DeviceAccess::gradient) {
      *grad += g;
    } else if (!adagrad) {
      *w -= lr * g;
    } else {
      *state += g * g;
      *w -= lr * g / (std::sqrt(*state) + 1e-7f);
    }
  }
  std::vector<std::vector<float>> buffers_;
};

// A small multiclass problem: dense rows, or the same rows as CSR.
struct Problem4 {
  static constexpr std::size_t kRows = 12, kCols = 7, kClasses = 3;
  std::vector<float> labels, values;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> index;
  std::vector<float> sparse_values;
  Problem4() {
    Rng rng(11);
    for (std::size_t r = 0; r < kRows; ++r) {
      labels.push_back(static_cast<float>(r % kClasses));
      for (std::size_t j = 0; j < kCols; ++j) {
        const float x = rng.uniform() < 0.4 ? 0.f : static_cast<float>(rng.normal());
        values.push_back(x);
        if (x != 0) {
          index.push_back(static_cast<std::uint32_t>(j));
          sparse_values.push_back(x);
        }
      }
      offsets.push_back(index.size());
    }
  }
  Dataset dataset(bool sparse) const {
    return sparse ? Dataset::sparse(labels, offsets, index, sparse_values, kCols, "csr")
                  : Dataset::dense(labels, values, kCols, "dense");
  }
  DeviceRows rows(bool sparse) const {
    DeviceRows d;
    d.cols = kCols;
    d.target = labels.data();
    if (sparse) {
      d.offsets = offsets.data();
      d.index = index.data();
      d.value = sparse_values.data();
    } else {
      d.value = values.data();
    }
    return d;
  }
};

struct Weights {
  std::vector<std::vector<float>> data, state;
  ParamSet set;
  Weights(const std::vector<TensorSpec>& specs, bool stateful) {
    Rng rng(5);
    std::vector<ParamSet::Tensor> t;
    for (const auto& s : specs) {
      auto& v = data.emplace_back(s.size);
      for (auto& x : v) x = static_cast<float>(rng.normal() * 0.5);
      state.emplace_back(s.size, 0.f);
    }
    for (std::size_t i = 0; i < specs.size(); ++i)
      t.push_back({specs[i].name, data[i].data(), specs[i].size,
                   stateful ? state[i].data() : nullptr});
    set = ParamSet(std::move(t));
  }
  Weights(const Weights& o) : data(o.data), state(o.state) {
    std::vector<ParamSet::Tensor> t;
    for (std::size_t i = 0; i < data.size(); ++i)
      t.push_back({o.set[i].name, data[i].data(), data[i].size(),
                   o.set[i].state ? state[i].data() : nullptr});
    set = ParamSet(std::move(t));
  }
};

double farthest(const Weights& a, const Weights& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    for (std::size_t k = 0; k < a.data[i].size(); ++k)
      worst = std::max(worst, double(std::fabs(a.data[i][k] - b.data[i][k])));
  return worst;
}

std::unique_ptr<Model> mlp_model(float l2, bool bias) {
  ModelOptions o;
  o.hidden = {5, 4};
  o.l2 = l2;
  o.bias = bias;
  auto m = make_model("mlp", o);
  Problem p;
  p.features = Problem4::kCols;
  p.classes = Problem4::kClasses;
  p.layout = Layout::dense;
  m->configure(p);
  return m;
}

}  // namespace

TEST_CASE("the device MLP's sequence takes MlpModel's CPU steps: dense and sparse rows, SGD and "
          "AdaGrad, L2 and biases, every mode's reads") {
  const Problem4 problem;
  const std::size_t batch = 4;
  std::vector<std::uint32_t> order(Problem4::kRows);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>((i * 5) % order.size());
  for (bool sparse : {false, true})
    for (Optimizer opt : {Optimizer::sgd, Optimizer::adagrad})
      for (float l2 : {0.f, 0.01f})
        for (bool bias : {true, false})
          for (DeviceAccess access : {DeviceAccess::serial, DeviceAccess::hogwild, DeviceAccess::lock}) {
            CAPTURE(sparse);
            CAPTURE(static_cast<int>(opt));
            CAPTURE(l2);
            CAPTURE(bias);
            CAPTURE(static_cast<int>(access));
            auto model = mlp_model(l2, bias);
            const Weights start(model->parameters(), opt == Optimizer::adagrad);
            // The CPU: one step per mini-batch of the order.
            Weights cpu = start;
            const Dataset data = problem.dataset(sparse);
            const float lr = 0.1f;
            double cpu_loss = 0;
            for (std::size_t b = 0; b < order.size(); b += batch)
              cpu_loss += model->train_batch(
                  StepKind{access_index<SerialUpdate>(), static_cast<std::uint8_t>(opt)},
                  Batch{&data, problem.labels.data(), order.data() + b, batch}, cpu.set, lr);
            // The device's sequence, over the same order in one chunk, on one stream
            // or (the Hogwild! modes) two, which take turns here.
            for (std::size_t streams : {1, 2}) {
              if (streams > 1 && access == DeviceAccess::serial) continue;
              CAPTURE(streams);
              Weights dev = start;
              std::vector<HostPrimitives> ops(streams);
              std::vector<MlpPrimitives*> each;
              for (auto& o : ops) each.push_back(&o);
              MlpSteps steps(dynamic_cast<const MlpModel&>(*model), dev.set,
                             std::vector<float*>(dev.set.count(), nullptr), access,
                             opt == Optimizer::adagrad, batch, each);
              double loss = 0;
              int lock_word = 0;
              DeviceChunk c;
              c.rows = problem.rows(sparse);
              c.order = order.data();
              c.begin = 0;
              c.count = order.size();
              c.lr = lr;
              c.access = access;
              c.adagrad = opt == Optimizer::adagrad;
              c.lock = &lock_word;
              c.loss_sum = &loss;
              steps.run(c);
              CHECK(loss == doctest::Approx(cpu_loss).epsilon(1e-5));
              CHECK(farthest(dev, cpu) < 1e-5);
              CHECK(farthest(dev, start) > 1e-3);  // it trained
              // Three mini-batches, taken by the streams in turn. Lock mode holds the
              // lock around each; the live modes read copies of the three W.
              int gathers = 0, locks = 0, unlocks = 0, snapshots = 0;
              for (const auto& o : ops) {
                gathers += o.gathers;
                locks += o.locks;
                unlocks += o.unlocks;
                snapshots += o.snapshots;
              }
              CHECK(gathers == 3);
              CHECK(ops.back().gathers == (streams == 1 ? 3 : 1));
              CHECK(locks == (access == DeviceAccess::lock ? 3 : 0));
              CHECK(unlocks == locks);
              CHECK(snapshots == (access == DeviceAccess::hogwild ? 3 * 3 : 0));
            }
          }
}

TEST_CASE("the device MLP's gradient access (ddp) sums the mini-batch's gradient, which applied "
          "as its mean is the CPU's step") {
  const Problem4 problem;
  std::vector<std::uint32_t> order(Problem4::kRows);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  for (float l2 : {0.f, 0.01f}) {
    CAPTURE(l2);
    auto model = mlp_model(l2, true);
    const Weights start(model->parameters(), false);
    Weights cpu = start;
    const Dataset data = problem.dataset(false);
    const float lr = 0.1f;
    model->train_batch(StepKind{access_index<SerialUpdate>(), 0},
                       Batch{&data, problem.labels.data(), order.data(), order.size()}, cpu.set,
                       lr);
    Weights dev = start;
    std::vector<std::vector<float>> grad;
    std::vector<float*> grads;
    for (const auto& t : dev.set.tensors()) grads.push_back(grad.emplace_back(t.size, 0.f).data());
    HostPrimitives ops;
    MlpSteps steps(dynamic_cast<const MlpModel&>(*model), dev.set, grads, DeviceAccess::gradient,
                   false, order.size(), {&ops});
    double loss = 0;
    DeviceChunk c;
    c.rows = problem.rows(false);
    c.order = order.data();
    c.count = order.size();
    c.access = DeviceAccess::gradient;
    c.loss_sum = &loss;
    steps.run(c);
    CHECK(farthest(dev, start) == 0);  // the weights are only read
    // launch_apply's step: w -= lr * grad / examples.
    for (std::size_t i = 0; i < dev.data.size(); ++i)
      for (std::size_t k = 0; k < dev.data[i].size(); ++k)
        dev.data[i][k] -= lr * grad[i][k] / static_cast<float>(order.size());
    CHECK(farthest(dev, cpu) < 1e-5);
  }
}
