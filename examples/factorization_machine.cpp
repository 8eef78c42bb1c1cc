// A user-defined model through the public API: a factorization machine (Rendle
// 2010) for binary labels, trained by 4 Hogwild! workers like any built-in model.
//   build/examples/factorization_machine     # per-epoch accuracy, then FM vs logistic
//
// Rows: one user and one item of 20 each, one-hot; label 1 when user + item is even.
// A linear model cannot beat 0.5; a rank-2 FM reaches about 1.0 (exit 0 if it does).
#include <cmath>
#include <cstdio>
#include <vector>
#include "hogwild/model_base.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
using namespace hogwild;
class FactorizationMachine : public ModelBase<FactorizationMachine> {
 public:
  static constexpr std::size_t k = 2;  // rank of the pairwise interactions
  std::string name() const override { return "fm"; }
  LabelKind label_kind() const override { return LabelKind::binary; }
  void configure(const Problem& p) override { d_ = p.features; }
  std::vector<TensorSpec> parameters() const override {
    return {{"w0", 1, {}}, {"w", d_, {}}, {"V", d_ * k, {Init::normal, 0.1f}}};
  }
  // z = w0 + sum_j w_j x_j + 1/2 sum_f ((sum_j V_jf x_j)^2 - sum_j V_jf^2 x_j^2)
  template <class U>
  float forward(const ParamSet& p, RowView x, float* s) const {
    float z = U::read(p.data(0)), sq[k] = {};
    for (std::uint32_t n = 0; n < x.nnz; ++n) {
      const std::uint32_t j = x.index[n];
      z += U::read(p.data(1) + j) * x.value[n];
      for (std::size_t f = 0; f < k; ++f) {
        const float v = U::read(p.data(2) + j * k + f) * x.value[n];
        s[f] += v;
        sq[f] += v * v;
      }
    }
    for (std::size_t f = 0; f < k; ++f) z += 0.5f * (s[f] * s[f] - sq[f]);
    return z;
  }
  template <class U>  // the gradient step, instantiated for every mode and optimiser
  double step(const Batch& b, const ParamSet& p, float lr) {
    double loss = 0;
    for (std::size_t i = 0; i < b.size; ++i) {
      const RowView x = b.row(i);
      float s[k] = {};  // sum_j V_jf x_j, reused by the gradient
      const float z = forward<U>(p, x, s), y = b.target(i);
      loss += std::log1p(std::exp(-(2 * y - 1) * z));
      const float g = 1 / (1 + std::exp(-z)) - y;  // dloss/dz
      U::descend(p[0], 0, g, lr);
      for (std::uint32_t n = 0; n < x.nnz; ++n) {
        const std::uint32_t j = x.index[n];
        const float xj = x.value[n];
        U::descend(p[1], j, g * xj, lr);
        for (std::size_t f = 0; f < k; ++f) {
          const float v = U::read(p.data(2) + j * k + f);
          U::descend(p[2], j * k + f, g * xj * (s[f] - v * xj), lr);
        }
      }
    }
    return loss;
  }
  void predict(const ParamSet& p, RowView x, float y, double& loss, bool& correct) const {
    float s[k] = {};
    const float z = forward<SerialUpdate>(p, x, s);
    loss = std::log1p(std::exp(-(2 * y - 1) * z));
    correct = (z > 0) == (y > 0.5f);
  }
 private:
  std::size_t d_ = 0;
};

Dataset user_item_parity(std::size_t rows, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> labels, values(2 * rows, 1.f);
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto user = static_cast<std::uint32_t>(rng.below(20));
    const auto item = static_cast<std::uint32_t>(rng.below(20));
    indices.insert(indices.end(), {user, 20 + item});
    offsets.push_back(indices.size());
    labels.push_back((user + item) % 2 == 0 ? 1.f : 0.f);
  }
  return Dataset::sparse(labels, offsets, indices, values, 40, "user-item parity");
}
int main() {
  const Dataset train_set = user_item_parity(20000, 1), test_set = user_item_parity(5000, 2);
  TrainConfig cfg;
  cfg.workers = 4;
  cfg.epochs = 8;
  cfg.step_size.lr0 = 0.1f;
  FactorizationMachine fm;
  const auto r = train(cfg, fm, train_set, &test_set, [](const Progress& p) {
    std::printf("epoch %.0f: test accuracy %.4f\n", p.epoch, p.test.accuracy);
  });
  const auto linear = train(cfg, train_set, &test_set);  // cfg.model is "logistic"
  std::printf("factorization machine: %.4f, logistic regression: %.4f (4 hogwild workers)\n",
              r.test.accuracy, linear.test.accuracy);
  return r.test.accuracy > 0.95 && linear.test.accuracy < 0.6 ? 0 : 1;
}
