// Optimisers: every built-in model reports its gradient through the optimiser (so
// AdaGrad applies to all of them), the vectorised shared AdaGrad kernel matches the
// scalar rule, and AdaGrad's accumulators are one shared state for all workers —
// not one private copy per process as in PyTorch's Hogwild pattern.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/softmax.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "owned_params.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

using Owned = test::OwnedParams;

Dataset sparse_rows(bool multiclass) {
  std::vector<float> labels{1, 0, multiclass ? 2.f : 0.f, 1};
  std::vector<std::uint64_t> off{0, 3, 5, 8, 10};
  std::vector<std::uint32_t> idx{0, 2, 5, 1, 2, 0, 3, 4, 4, 5};
  std::vector<float> val{0.5f, -1.0f, 0.25f, 1.5f, 0.75f, -0.5f, 1.0f, 0.3f, -0.8f, 0.6f};
  return Dataset::sparse(labels, off, idx, val, 6, "sparse");
}

Dataset dense_rows(bool multiclass) {
  return test::gaussian_rows({0, 1, multiclass ? 2.f : 1.f, 1, 0}, 19, 7);
}

// One AdaGrad step from zero state must equal w - lr * g / (|g| + eps) with g the
// gradient an SGD step with lr = 1 implies, and leave G = g^2.
int check_adagrad_uses_gradient(Model& base_model, const Dataset& d,
                                 std::vector<std::uint32_t> rows) {
  auto* model = dynamic_cast<LinearModel*>(&base_model);
  auto* softmax = dynamic_cast<SoftmaxModel*>(&base_model);
  const auto targets = LabelMap::fit(base_model.label_kind(), d, base_model.name()).targets(d);
  Problem problem{d.cols(), LabelMap::fit(base_model.label_kind(), d, "m").classes(), d.layout()};
  base_model.configure(problem);
  const auto specs = base_model.parameters();
  Owned start(specs, 5), sgd(start), ada(start);
  const Batch b{&d, targets.data(), rows.data(), rows.size()};
  const float lr = 0.05f;
  if (model) {
    model->step<Update<SerialUpdate, Sgd>>(b, sgd.set, 1.0f);
    model->step<Update<SerialUpdate, AdaGrad>>(b, ada.set, lr);
  } else {
    softmax->step<Update<SerialUpdate, Sgd>>(b, sgd.set, 1.0f);
    softmax->step<Update<SerialUpdate, AdaGrad>>(b, ada.set, lr);
  }
  int moved = 0;
  for (std::size_t t = 0; t < specs.size(); ++t)
    for (std::size_t j = 0; j < specs[t].size; ++j) {
      const double g = start.store[t][j] - sgd.store[t][j];
      INFO(base_model.name() << " " << specs[t].name << "[" << j << "] g=" << g);
      CHECK(ada.state[t][j] == doctest::Approx(g * g).epsilon(1e-4).scale(1e-6));
      const double expect = start.store[t][j] - lr * g / (std::abs(g) + AdaGrad::eps);
      CHECK(ada.store[t][j] == doctest::Approx(expect).epsilon(1e-4).scale(1e-5));
      moved += std::abs(g) > 1e-6;
    }
  return moved;  // coordinates the step moved
}

}  // namespace

TEST_CASE("every built-in model applies its gradient through the optimiser") {
  const Dataset sparse = sparse_rows(false), dense = dense_rows(false);
  for (const char* name : {"logistic", "hinge", "squared"}) {
    auto m = make_model(name, {});
    int moved = 0;
    for (std::uint32_t r = 0; r < 4; ++r) {  // batch 1: each coordinate once
      moved += check_adagrad_uses_gradient(*m, sparse, {r});
      moved += check_adagrad_uses_gradient(*m, dense, {r});
    }
    CHECK(moved > 10);
  }
  auto s = make_model("softmax", {});
  CHECK(check_adagrad_uses_gradient(*s, sparse_rows(true), {0}) > 3);
  // dense mini-batch: one summed step
  CHECK(check_adagrad_uses_gradient(*s, dense_rows(true), {0, 1, 4}) > 19);  // dense mini-batch: one summed step
}

TEST_CASE("the vectorised shared AdaGrad kernel matches the scalar rule, x aliasing w too") {
  for (std::size_t n : {1u, 4u, 7u, 37u}) {
    Rng rng(n);
    std::vector<float> w(n), G(n), x(n);
    for (std::size_t i = 0; i < n; ++i) {
      w[i] = static_cast<float>(rng.normal());
      G[i] = static_cast<float>(rng.uniform());
      x[i] = static_cast<float>(rng.normal());
    }
    auto w2 = w, G2 = G;
    detail::dense_adagrad_shared(w.data(), G.data(), 0.7f, x.data(), n, 0.1f, 1e-7f);
    for (std::size_t i = 0; i < n; ++i) {
      const float g = 0.7f * x[i];
      G2[i] += g * g;
      w2[i] -= 0.1f * g / (std::sqrt(G2[i]) + 1e-7f);
      CHECK(G[i] == doctest::Approx(G2[i]).epsilon(1e-6));
      CHECK(w[i] == doctest::Approx(w2[i]).epsilon(1e-5));
    }
    auto w3 = w, G3 = G;  // the L2 form: x is w itself
    detail::dense_adagrad_shared(w.data(), G.data(), 0.5f, w.data(), n, 0.1f, 1e-7f);
    for (std::size_t i = 0; i < n; ++i) {
      const float g = 0.5f * w3[i];
      G3[i] += g * g;
      CHECK(w[i] == doctest::Approx(w3[i] - 0.1f * g / (std::sqrt(G3[i]) + 1e-7f)).epsilon(1e-5));
    }
  }
}

namespace {

// Gradient 1 on its one weight for every example: G counts the examples all
// workers processed, if and only if G is shared.
class Counter : public ModelBase<Counter> {
 public:
  std::string name() const override { return "counter"; }
  LabelKind label_kind() const override { return LabelKind::real; }
  void configure(const Problem&) override {}
  std::vector<TensorSpec> parameters() const override { return {{"w", 1, {}}}; }
  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr) {
    for (std::size_t i = 0; i < b.size; ++i) U::descend(p[0], 0, 1.0f, lr);
    return 0;
  }
  void predict(const ParamSet&, RowView, float, double& loss, bool& ok) const {
    loss = 0;
    ok = false;
  }
  bool reports_accuracy() const { return false; }
};

}  // namespace

TEST_CASE("AdaGrad's accumulators are shared by all workers (atomic mode counts exactly)") {
  auto [data, unused] = test::generated_problem(3000, 10, 20, 3, 0.0, 1);
  TrainConfig c;
  c.mode = Mode::atomic;
  c.workers = 2;
  c.epochs = 2;
  c.optimizer = Optimizer::adagrad;
  c.step_size.lr0 = 0.01f;
  Counter model;
  const auto r = train(c, model, data, nullptr);
  const double n = 2.0 * 3000;
  REQUIRE(r.optimizer_state.count("w"));
  CHECK(r.optimizer_state.at("w")[0] == n);  // every worker's g^2 landed in one G
  // Shared G: w = -lr * sum_k 1/sqrt(k), k = 1..n (up to interleaving); private
  // accumulators would give 2 * sum over n/2, a factor of about sqrt(2) more.
  double shared = 0, priv = 0;
  for (int k = 1; k <= n; ++k) shared += 1 / std::sqrt(k);
  for (int k = 1; k <= n / 2; ++k) priv += 2 / std::sqrt(k);
  const double w = -r.parameters.at("w")[0] / c.step_size.lr0;
  MESSAGE("sum of steps " << w << ", shared state predicts " << shared << ", private " << priv);
  CHECK(std::abs(w - shared) < 0.02 * shared);
  CHECK(std::abs(w - priv) > 0.2 * shared);
}

TEST_CASE("AdaGrad: no state under SGD, state under AdaGrad; hogwild x2 within 0.5 points of serial") {
  auto [train_set, test_set] = test::generated_problem(30000, 8000, 2000, 20, 0.0, 3);
  TrainConfig c;
  c.epochs = 8;
  c.step_size.lr0 = 0.3f;
  c.seed = 9;
  c.mode = Mode::serial;
  const auto sgd = train(c, train_set, &test_set);
  CHECK(sgd.optimizer_state.empty());
  c.optimizer = Optimizer::adagrad;
  const auto serial = train(c, train_set, &test_set);
  REQUIRE(serial.optimizer_state.count("w"));
  MESSAGE("adagrad serial accuracy " << serial.test.accuracy << " (sgd lr 0.1: " << sgd.test.accuracy << ")");
  CHECK(serial.test.accuracy > 0.83);
  c.mode = Mode::hogwild;
  c.workers = 2;
  const auto hw = train(c, train_set, &test_set);
  MESSAGE("adagrad hogwild x2 accuracy " << hw.test.accuracy);
  CHECK(std::abs(hw.test.accuracy - serial.test.accuracy) <= 0.005);
}

TEST_CASE("an unknown optimiser is a ConfigError naming the valid ones") {
  CHECK(parse_optimizer("adagrad") == Optimizer::adagrad);
  CHECK_THROWS_WITH_AS(parse_optimizer("adam"),
                       doctest::Contains("expected sgd or adagrad"), ConfigError);
}
