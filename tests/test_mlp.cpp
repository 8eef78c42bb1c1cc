// The MLP: its step against finite differences of its loss (dense and sparse rows,
// batch 1 and mini-batches, L2), every mode's single-process step alike, batched
// evaluation equal to per-row prediction, two Hogwild! workers converging like
// serial SGD, and the CLI's --hidden checks.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "owned_params.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

using Owned = test::OwnedParams;

Dataset rows_of(bool dense) {
  Rng rng(7);
  std::vector<float> labels{0, 1, 2, 1, 0};
  if (dense) {
    std::vector<float> val(5 * 11);
    for (auto& v : val) v = static_cast<float>(rng.normal());
    return Dataset::dense(labels, val, 11, "dense");
  }
  std::vector<std::uint64_t> off{0, 3, 5, 8, 10, 12};
  std::vector<std::uint32_t> idx{0, 2, 5, 1, 2, 0, 3, 4, 4, 5, 1, 3};
  std::vector<float> val(idx.size());
  for (auto& v : val) v = static_cast<float>(rng.normal());
  return Dataset::sparse(labels, off, idx, val, 6, "sparse");
}

// Mean loss of the batch plus the L2 term lambda/2 ||W||^2 on the weight tensors.
double objective(const MlpModel& m, const ParamSet& p, const Batch& b, float l2) {
  double penalty = 0;
  for (auto& t : p.tensors())
    if (t.name[0] == 'W')
      for (std::size_t j = 0; j < t.size; ++j) penalty += 0.5 * l2 * t.data[j] * t.data[j];
  return test::batch_loss(m, p, b) + penalty;
}

struct Setup {
  Dataset data;
  MlpModel model;
  std::vector<float> targets;
  Setup(bool dense, float l2, std::vector<std::size_t> hidden)
      : data(rows_of(dense)), model(ModelOptions{l2, true, std::move(hidden)}) {
    auto labels = LabelMap::fit(model.label_kind(), data, "mlp");
    model.configure(Problem{data.cols(), labels.classes(), data.layout()});
    targets = labels.targets(data);
  }
};

}  // namespace

TEST_CASE("mlp: gradient matches finite differences") {
  for (bool dense : {true, false})
    for (float l2 : {0.f, 0.1f})
      for (std::vector<std::uint32_t> rows : {std::vector<std::uint32_t>{2}, {0, 1, 3, 4}}) {
        Setup s(dense, l2, {7, 5});
        Owned base(s.model.parameters(), 11), stepped(base);
        Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
        s.model.step<Update<SerialUpdate, Sgd>>(b, stepped.set, 1.0f);
        INFO((dense ? "dense" : "sparse") << " l2 " << l2 << " batch " << rows.size());
        const double eps = 1e-3;
        for (std::size_t t = 0; t < base.store.size(); ++t)
          for (std::size_t j = 0; j < base.store[t].size(); ++j) {
            Owned plus(base), minus(base);
            plus.store[t][j] += static_cast<float>(eps);
            minus.store[t][j] -= static_cast<float>(eps);
            const double numeric = (objective(s.model, plus.set, b, l2) -
                                    objective(s.model, minus.set, b, l2)) / (2 * eps);
            INFO(base.set.tensor(t).name << "[" << j << "]");
            CHECK(base.store[t][j] - stepped.store[t][j] ==
                  doctest::Approx(numeric).epsilon(2e-2).scale(0.05));
          }
      }
}

TEST_CASE("mlp: every update mode computes the same single-process step") {
  // Hidden widths past one register tile (and not a multiple of it), so that the
  // live kernel's whole-lane tiles and its edge columns both run.
  Setup s(true, 0.01f, {37});
  Owned base(s.model.parameters(), 5), h(base), a(base), l(base), serial(base);
  // The same tensors marked exclusive (a worker's replica): hogwild and atomic then
  // compute in place without the live operands or the copy.
  Owned hx(base), ax(base);
  const ParamSet hx_set(hx.set.tensors(), true), ax_set(ax.set.tensors(), true);
  std::vector<std::uint32_t> rows{0, 1, 2, 3, 4};
  Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
  s.model.step<Update<SerialUpdate, Sgd>>(b, serial.set, 0.3f);
  s.model.step<Update<HogwildUpdate, Sgd>>(b, h.set, 0.3f);
  s.model.step<Update<AtomicUpdate, Sgd>>(b, a.set, 0.3f);
  s.model.step<Update<LockUpdate, Sgd>>(b, l.set, 0.3f);
  s.model.step<Update<HogwildUpdate, Sgd>>(b, hx_set, 0.3f);
  s.model.step<Update<AtomicUpdate, Sgd>>(b, ax_set, 0.3f);
  int changed = 0;
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      const float want = serial.store[t][i];
      changed += want != base.store[t][i];
      CHECK(h.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(a.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(l.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(hx.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
      CHECK(ax.store[t][i] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
    }
  CHECK(changed > 400);  // the step moved (nearly) every weight
}

TEST_CASE("mlp: AdaGrad divides each coordinate's gradient by its accumulated norm") {
  Setup s(true, 0.05f, {6});
  Owned base(s.model.parameters(), 3), sgd(base), ada(base);
  std::vector<std::vector<float>> G;
  std::vector<ParamSet::Tensor> with_state;
  for (std::size_t t = 0; t < ada.store.size(); ++t) {
    G.emplace_back(ada.store[t].size(), 0.f);
    with_state.push_back({ada.set[t].name, ada.store[t].data(), ada.store[t].size(), G[t].data()});
  }
  const ParamSet ada_set(std::move(with_state));
  std::vector<std::uint32_t> rows{0, 2, 3};
  Batch b{&s.data, s.targets.data(), rows.data(), rows.size()};
  s.model.step<Update<SerialUpdate, Sgd>>(b, sgd.set, 1.0f);  // w - g
  s.model.step<Update<HogwildUpdate, AdaGrad>>(b, ada_set, 0.1f);
  for (std::size_t t = 0; t < base.store.size(); ++t)
    for (std::size_t i = 0; i < base.store[t].size(); ++i) {
      const double g = base.store[t][i] - sgd.store[t][i];
      INFO(base.set[t].name << "[" << i << "] g " << g);
      CHECK(G[t][i] == doctest::Approx(g * g).epsilon(1e-3).scale(1e-6));
      const double want = std::abs(g) < 1e-5 ? 0.0 : 0.1 * g / std::abs(g);
      CHECK(base.store[t][i] - ada.store[t][i] == doctest::Approx(want).epsilon(1e-3).scale(1e-3));
    }
}

TEST_CASE("mlp: batched evaluation equals per-row prediction") {
  for (bool dense : {true, false}) {
    Setup s(dense, 0, {6, 4});
    Owned p(s.model.parameters(), 9);
    Evaluation e = s.model.evaluate(p.set, s.data, s.targets.data());
    double loss = 0;
    std::size_t correct = 0;
    for (std::size_t r = 0; r < s.data.rows(); ++r) {
      double l;
      bool ok;
      s.model.predict(p.set, s.data.row(r), s.targets[r], l, ok);
      loss += l;
      correct += ok;
    }
    CHECK(e.rows == s.data.rows());
    CHECK(e.loss == doctest::Approx(loss / 5).epsilon(1e-5));
    CHECK(e.accuracy == doctest::Approx(static_cast<double>(correct) / 5));
  }
}

namespace {

// Train/test halves of Fashion-MNIST's test file where installed (a real image
// problem in a second), else three rings in the plane padded with noise features:
// no linear model separates them.
std::pair<Dataset, Dataset> problem() {
  const std::filesystem::path fm = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (std::filesystem::exists(fm)) {
    Dataset all = load_dataset(fm.string());
    return {test::slice(all, 0, 6000, "fashion-train"), test::slice(all, 6000, 10000, "fashion-test")};
  }
  MESSAGE("Fashion-MNIST not installed: generated rings instead");
  auto make = [](std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<float> labels, values;
    for (std::size_t i = 0; i < n; ++i) {
      const int k = static_cast<int>(rng.below(3));
      const double r = 0.5 + k + 0.3 * rng.uniform(), a = 6.283185307179586 * rng.uniform();
      values.push_back(static_cast<float>(r * std::cos(a)));
      values.push_back(static_cast<float>(r * std::sin(a)));
      for (int j = 0; j < 8; ++j) values.push_back(static_cast<float>(rng.normal()));
      labels.push_back(static_cast<float>(k));
    }
    return Dataset::dense(labels, values, 10, "rings");
  };
  return {make(6000, 1), make(2000, 2)};
}

}  // namespace

TEST_CASE("mlp: two Hogwild! workers (SGD, AdaGrad) reach serial SGD's accuracy") {
  auto [train_set, test_set] = problem();
  TrainConfig c;
  c.model = "mlp";
  c.model_options.hidden = {64};
  c.epochs = 10;  // near convergence: early epochs vary by points from run to run
  c.batch = 16;
  c.step_size.lr0 = 0.1f;
  c.step_size.decay = 0.8f;
  c.mode = Mode::serial;
  const auto serial = train(c, train_set, &test_set);
  c.mode = Mode::hogwild;
  c.workers = 2;
  const auto hogwild = train(c, train_set, &test_set);
  c.optimizer = Optimizer::adagrad;
  c.step_size.lr0 = 0.01f;
  const auto adagrad = train(c, train_set, &test_set);
  MESSAGE("serial " << serial.test.accuracy << ", hogwild x2 " << hogwild.test.accuracy
                    << ", hogwild x2 adagrad " << adagrad.test.accuracy);
  CHECK(adagrad.test.accuracy > serial.test.accuracy - 0.05);
  CHECK(serial.test.accuracy > 0.75);
  CHECK(hogwild.test.accuracy > serial.test.accuracy - 0.03);
  CHECK(hogwild.parameters.count("W1") == 1);
  CHECK(hogwild.parameters.count("b2") == 1);
}

TEST_CASE("mlp: hogwild_train rejects bad --hidden values with exit status 2") {
  test::TempDir dir;
  auto [tr, te] = test::generated_problem(200, 50, 30, 5, 0.0, 3);
  write_libsvm(tr, dir.file("train.svm"));
  for (const char* bad : {"", "0", "256,,128", "-5", "12a", "256, 128", "99999999"}) {
    auto r = test::run({test::hogwild_train_path(), "--train", dir.file("train.svm"), "--model",
                        "mlp", "--hidden", bad, "--epochs", "1"});
    INFO("--hidden \"" << std::string(bad) << "\": " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("--hidden expects comma-separated positive layer widths") != std::string::npos);
  }
  auto ok = test::run({test::hogwild_train_path(), "--train", dir.file("train.svm"), "--model",
                       "mlp", "--hidden", "8,4", "--epochs", "1", "-q"});
  CHECK_MESSAGE(ok.exit_code == 0, ok.out);
}
