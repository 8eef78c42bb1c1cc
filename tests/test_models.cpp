// Every built-in model's gradient step against central finite differences of its
// loss, on sparse and dense rows, batch 1 and mini-batches, with and without L2.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/models/softmax.hpp"
#include "hogwild/rng.hpp"
#include "owned_params.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

using Owned = test::OwnedParams;

Dataset sparse_rows() {
  // 4 rows over 6 features; labels 0/1 and class ids 0..2 both fit in {0,1,2}.
  std::vector<float> labels{1, 0, 2, 1};
  std::vector<std::uint64_t> off{0, 3, 5, 8, 10};
  std::vector<std::uint32_t> idx{0, 2, 5, 1, 2, 0, 3, 4, 4, 5};
  std::vector<float> val{0.5f, -1.0f, 0.25f, 1.5f, 0.75f, -0.5f, 1.0f, 0.3f, -0.8f, 0.6f};
  return Dataset::sparse(labels, off, idx, val, 6, "sparse");
}

Dataset dense_rows() { return test::gaussian_rows({0, 1, 2, 1, 0}, 19, 7); }

// Checks step's implied gradient (w - w') / lr against finite differences.
template <class M>
void check_gradient(M& model, const Dataset& d, const std::vector<float>& targets,
                    std::vector<std::uint32_t> rows) {
  const auto specs = model.parameters();
  Owned base(specs, 11);
  Owned stepped(base);
  Batch b{&d, targets.data(), rows.data(), rows.size()};
  const float lr = 1.0f;
  model.template step<Update<SerialUpdate, Sgd>>(b, stepped.set, lr);
  const double eps = 1e-3;
  int checked = 0;
  for (std::size_t t = 0; t < specs.size(); ++t) {
    for (std::size_t j = 0; j < specs[t].size; ++j) {
      const double analytic = (base.store[t][j] - stepped.store[t][j]) / lr;
      Owned plus(base), minus(base);
      plus.store[t][j] += static_cast<float>(eps);
      minus.store[t][j] -= static_cast<float>(eps);
      const double numeric = (test::batch_loss(model, plus.set, b) - test::batch_loss(model, minus.set, b)) / (2 * eps);
      INFO("tensor " << specs[t].name << "[" << j << "]");
      CHECK(analytic == doctest::Approx(numeric).epsilon(2e-2).scale(1.0));
      ++checked;
    }
  }
  CHECK(checked > 0);
}

std::vector<float> targets_for(const Model& m, const Dataset& d) {
  return LabelMap::fit(m.label_kind(), d, m.name()).targets(d);
}

Dataset binary(const Dataset& d) {
  // Relabel to 0/1 (class 2 -> 1) so binary models accept it.
  std::vector<float> labels(d.labels().begin(), d.labels().end());
  for (auto& l : labels) l = l > 0 ? 1.f : 0.f;
  if (d.layout() == Layout::dense) return Dataset::dense(labels, d.values(), d.cols(), d.source());
  return Dataset::sparse(labels, d.offsets(), d.indices(), d.values(), d.cols(), d.source());
}

}  // namespace

TEST_CASE("linear models: gradient matches finite differences") {
  for (LinearLoss loss : {LinearLoss::logistic, LinearLoss::hinge, LinearLoss::squared}) {
    for (bool dense : {false, true}) {
      for (std::vector<std::uint32_t> rows : {std::vector<std::uint32_t>{1}, std::vector<std::uint32_t>{0, 2, 3}}) {
        LinearModel m(loss, ModelOptions{0.f, true});
        Dataset d = binary(dense ? dense_rows() : sparse_rows());
        m.configure(Problem{d.cols(), 2, d.layout()});
        auto t = targets_for(m, d);
        INFO(m.name() << (dense ? " dense" : " sparse") << " batch " << rows.size());
        check_gradient(m, d, t, rows);
      }
    }
  }
}

TEST_CASE("logistic loss and slope are exact at extreme margins") {
  LinearModel m(LinearLoss::logistic, {});
  float loss, slope;
  m.loss_and_slope(100.f, 0.f, loss, slope);
  CHECK(loss == doctest::Approx(100.0));
  CHECK(slope == doctest::Approx(1.0));
  m.loss_and_slope(-100.f, 0.f, loss, slope);
  CHECK(loss == doctest::Approx(0.0));
  CHECK(std::isfinite(loss));
  m.loss_and_slope(0.f, 1.f, loss, slope);
  CHECK(loss == doctest::Approx(std::log(2.0)));
  CHECK(slope == doctest::Approx(-0.5));
}

TEST_CASE("L2 on dense rows shrinks every weight by lr * lambda") {
  LinearModel m(LinearLoss::squared, ModelOptions{0.5f, false});
  Dataset d = binary(dense_rows());
  m.configure(Problem{d.cols(), 2, d.layout()});
  auto t = targets_for(m, d);
  Owned base(m.parameters(), 3), with(base);
  LinearModel m0(LinearLoss::squared, ModelOptions{0.f, false});
  m0.configure(Problem{d.cols(), 2, d.layout()});
  Owned without(base);
  std::vector<std::uint32_t> rows{2};
  Batch b{&d, t.data(), rows.data(), 1};
  m.step<Update<SerialUpdate, Sgd>>(b, with.set, 0.1f);
  m0.step<Update<SerialUpdate, Sgd>>(b, without.set, 0.1f);
  for (std::size_t j = 0; j < d.cols(); ++j)
    CHECK(without.store[0][j] - with.store[0][j] == doctest::Approx(0.1 * 0.5 * base.store[0][j]).epsilon(1e-3).scale(1e-4));
}

TEST_CASE("softmax: gradient matches finite differences") {
  for (bool dense : {false, true}) {
    for (std::vector<std::uint32_t> rows : {std::vector<std::uint32_t>{2}, std::vector<std::uint32_t>{0, 1, 3}}) {
      SoftmaxModel m(ModelOptions{0.f, true});
      Dataset d = dense ? dense_rows() : sparse_rows();
      auto labels = LabelMap::fit(m.label_kind(), d, "softmax");
      m.configure(Problem{d.cols(), labels.classes(), d.layout()});
      CHECK(m.classes() == 3);
      auto t = labels.targets(d);
      INFO((dense ? "dense" : "sparse") << " batch " << rows.size());
      check_gradient(m, d, t, rows);
    }
  }
}

TEST_CASE("softmax and MLP losses stay finite for a confidently wrong prediction") {
  // Logits (0, -200, 0) and target 1: p[1] = e^-200 / 2 underflows to 0 in float,
  // but -log p[1] = 200 + log 2 is an ordinary number (it was inf, which the trainer
  // reported as divergence).
  const Dataset d = dense_rows();
  const auto labels = LabelMap::fit(LabelKind::multiclass, d, "softmax");
  const Problem problem{d.cols(), labels.classes(), d.layout()};
  auto wrong = [&](Model& m, ParamSet& p, const std::string& bias_name) {
    for (auto& t : p.tensors()) std::fill(t.data, t.data + t.size, 0.f);
    for (auto& t : p.tensors())
      if (t.name == bias_name) t.data[1] = -200.f;
    double loss = 0;
    bool correct = true;
    if (auto* s = dynamic_cast<SoftmaxModel*>(&m)) s->predict(p, d.row(0), 1.f, loss, correct);
    if (auto* s = dynamic_cast<MlpModel*>(&m)) s->predict(p, d.row(0), 1.f, loss, correct);
    CHECK_FALSE(correct);
    CHECK(loss == doctest::Approx(200 + std::log(2.0)).epsilon(1e-4));
  };
  SoftmaxModel softmax({});
  softmax.configure(problem);
  Owned ps(softmax.parameters(), 1);
  wrong(softmax, ps.set, "b");
  ModelOptions o;
  o.hidden = {4};
  MlpModel mlp(o);
  mlp.configure(problem);
  Owned pm(mlp.parameters(), 1);
  wrong(mlp, pm.set, "b2");
}

TEST_CASE("every update mode computes the same single-process step") {
  Dataset d = dense_rows();
  SoftmaxModel m({});
  auto labels = LabelMap::fit(m.label_kind(), d, "softmax");
  m.configure(Problem{d.cols(), labels.classes(), d.layout()});
  auto t = labels.targets(d);
  Owned base(m.parameters(), 5);
  Owned s(base), h(base), a(base), l(base);
  std::vector<std::uint32_t> rows{0, 1, 2, 3, 4};
  Batch b{&d, t.data(), rows.data(), rows.size()};
  m.step<Update<SerialUpdate, Sgd>>(b, s.set, 0.3f);
  m.step<Update<HogwildUpdate, Sgd>>(b, h.set, 0.3f);
  m.step<Update<AtomicUpdate, Sgd>>(b, a.set, 0.3f);
  m.step<Update<LockUpdate, Sgd>>(b, l.set, 0.3f);
  for (std::size_t i = 0; i < s.store[0].size(); ++i) {
    CHECK(h.store[0][i] == doctest::Approx(s.store[0][i]).epsilon(1e-5).scale(1e-5));
    CHECK(a.store[0][i] == doctest::Approx(s.store[0][i]).epsilon(1e-5).scale(1e-5));
    CHECK(l.store[0][i] == doctest::Approx(s.store[0][i]).epsilon(1e-5).scale(1e-5));
  }
}

TEST_CASE("the registry builds every built-in model and rejects unknown names") {
  for (const char* n : {"logistic", "hinge", "squared", "softmax"}) CHECK(make_model(n)->name() == n);
  try {
    make_model("svm");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("logistic") != std::string::npos);
  }
}
