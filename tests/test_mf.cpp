// Matrix factorization: the step against finite differences of its loss, every mode
// converging on a generated low-rank problem to a test RMSE near the noise level,
// and hogwild_train --model mf end to end on MovieLens-style files.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/models/mf.hpp"
#include "memory/param_snapshot.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Parameters in private vectors, random normal, with the shapes the model declares.
struct Params {
  std::vector<std::vector<float>> store;
  ParamSet set;
  Params(const std::vector<TensorSpec>& specs, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<ParamSet::Tensor> t;
    store.reserve(specs.size());
    for (const auto& s : specs) {
      auto& v = store.emplace_back(s.size);
      for (auto& x : v) x = static_cast<float>(rng.normal() * 0.5);
      t.push_back({s.name, v.data(), v.size()});
    }
    set = ParamSet(std::move(t));
  }
};

// Four ratings by 3 users of 3 items; rows 1 and 3 share user 1 and item 2.
Dataset small_ratings() {
  std::vector<float> r{4, 2, 5, 3.5f};
  std::vector<std::uint32_t> u{0, 1, 2, 1}, i{0, 2, 1, 2};
  return Dataset::ratings(r, u, i, "small");
}

Problem problem_of(const Dataset& d) {
  Problem p;
  p.layout = Layout::ratings;
  p.users = d.users();
  p.items = d.cols();
  p.features = std::max(p.users, p.items);
  for (float y : d.labels()) p.target_mean += y / static_cast<double>(d.rows());
  return p;
}

// The batch's mean of (z - r)^2 / 2 + lambda/2 (|p_u|^2 + |q_i|^2).
double objective(const MfModel& m, const ParamSet& p, const Batch& b, float l2) {
  const std::size_t k = m.rank();
  double total = 0;
  for (std::size_t n = 0; n < b.size; ++n) {
    double loss;
    bool ok;
    const RowView x = b.row(n);
    m.predict(p, x, b.target(n), loss, ok);
    double norm = 0;
    for (std::size_t j = 0; j < k; ++j) {
      norm += std::pow(p.data(0)[x.index[0] * k + j], 2);
      norm += std::pow(p.data(1)[x.index[1] * k + j], 2);
    }
    total += loss + 0.5 * l2 * norm;
  }
  return total / static_cast<double>(b.size);
}

TrainConfig mf_config(Mode mode, unsigned workers) {
  TrainConfig c;
  c.model = "mf";
  c.model_options.rank = 5;
  c.model_options.l2 = 0.01f;
  c.mode = mode;
  c.workers = workers;
  c.epochs = 15;
  c.step_size.lr0 = 0.02f;
  c.seed = 3;
  return c;
}

}  // namespace

TEST_CASE("mf: the step's gradient matches finite differences (batches, shared rows, L2, biases)") {
  Dataset d = small_ratings();
  const std::vector<float> targets(d.labels().begin(), d.labels().end());
  for (bool bias : {true, false}) {
    for (float l2 : {0.f, 0.3f}) {
      for (std::vector<std::uint32_t> rows : {std::vector<std::uint32_t>{2}, {1, 3}, {0, 1, 2, 3}}) {
        MfModel m(ModelOptions{.l2 = l2, .bias = bias, .rank = 3});
        m.configure(problem_of(d));
        Params base(m.parameters(), 11);
        Batch b{&d, targets.data(), rows.data(), rows.size()};
        ParamSnapshot stepped(base.set);
        const float lr = 1.0f;
        m.step<SerialSgd>(b, stepped.params(), lr);
        const double eps = 1e-3;
        for (std::size_t t = 0; t < base.set.count(); ++t) {
          for (std::size_t j = 0; j < base.set.size(t); ++j) {
            const double analytic = (base.set.data(t)[j] - stepped.params().data(t)[j]) / lr;
            ParamSnapshot plus(base.set), minus(base.set);
            plus.params().data(t)[j] += static_cast<float>(eps);
            minus.params().data(t)[j] -= static_cast<float>(eps);
            const double numeric =
                (objective(m, plus.params(), b, l2) - objective(m, minus.params(), b, l2)) / (2 * eps);
            INFO("bias " << bias << " l2 " << l2 << " batch " << rows.size() << " "
                         << base.set.tensor(t).name << "[" << j << "]");
            CHECK(analytic == doctest::Approx(numeric).epsilon(1e-2).scale(1.0));
          }
        }
      }
    }
  }
}

TEST_CASE("mf: every update mode computes the same single-process step; RMSE is sqrt(mean (z-r)^2)") {
  Dataset d = small_ratings();
  const std::vector<float> targets(d.labels().begin(), d.labels().end());
  MfModel m(ModelOptions{.l2 = 0.1f, .bias = true, .rank = 4});
  m.configure(problem_of(d));
  CHECK(m.mean() == doctest::Approx(3.625));
  Params base(m.parameters(), 5);
  ParamSnapshot s(base.set), h(base.set), a(base.set), l(base.set);
  std::vector<std::uint32_t> rows{0, 1, 2, 3};
  Batch b{&d, targets.data(), rows.data(), rows.size()};
  m.step<SerialSgd>(b, s.params(), 0.3f);
  m.step<Update<HogwildUpdate, Sgd>>(b, h.params(), 0.3f);
  m.step<Update<AtomicUpdate, Sgd>>(b, a.params(), 0.3f);
  m.step<Update<LockUpdate, Sgd>>(b, l.params(), 0.3f);
  for (std::size_t t = 0; t < base.set.count(); ++t)
    for (std::size_t j = 0; j < base.set.size(t); ++j)
      for (const ParamSnapshot* other : {&h, &a, &l})
        CHECK(other->params().data(t)[j] == doctest::Approx(s.params().data(t)[j]).epsilon(1e-5));

  Evaluation e = m.evaluate(base.set, d, targets.data());
  double sq = 0;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    double loss;
    bool ok;
    m.predict(base.set, d.row(r), targets[r], loss, ok);
    sq += 2 * loss;
  }
  CHECK(std::isnan(e.accuracy));
  CHECK(e.rmse == doctest::Approx(std::sqrt(sq / 4)));
}

TEST_CASE("mf: options and data it cannot take are ConfigErrors") {
  CHECK_THROWS_AS(MfModel(ModelOptions{.l2 = 0, .bias = true, .rank = 0}), ConfigError);
  CHECK_THROWS_AS(make_model("mf", ModelOptions{.l2 = 0, .bias = true, .rank = 5000}), ConfigError);
  MfModel m(ModelOptions{});
  Problem sparse;
  sparse.features = 10;
  CHECK_THROWS_WITH_AS(m.configure(sparse), doctest::Contains("model mf needs rating triples"), ConfigError);
  CHECK(make_model("mf")->name() == "mf");
}

TEST_CASE("mf: serial reaches the noise level; hogwild x2, atomic, lock and AdaGrad stay close" *
          doctest::test_suite("statistics")) {
  if (test::skip_statistics_under_sanitizers()) return;
  RatingsGenerateOptions g;
  g.users = 300;
  g.items = 200;
  g.rank = 5;
  g.ratings = 60000;
  g.test_ratings = 6000;
  g.noise = 0.3;
  g.seed = 5;
  auto data = generate_ratings(g);
  const double serial = train(mf_config(Mode::serial, 1), data.train, &data.test).test.rmse;
  MESSAGE("serial test rmse " << serial << " (noise " << g.noise << ")");
  CHECK(serial < 1.15 * g.noise);
  CHECK(serial > 0.9 * g.noise);
  for (Mode mode : {Mode::hogwild, Mode::atomic, Mode::lock}) {
    TrainResult r = train(mf_config(mode, 2), data.train, &data.test);
    MESSAGE(to_string(mode) << " x2 test rmse " << r.test.rmse << ", "
                            << r.samples_per_second << " ratings/s");
    CHECK(r.samples == 15 * g.ratings);
    CHECK(r.test.rmse < serial * 1.05 + 0.005);
  }
  for (Mode mode : {Mode::serial, Mode::hogwild}) {  // AdaGrad: gradients go through U::descend
    TrainConfig c = mf_config(mode, 2);
    c.optimizer = Optimizer::adagrad;
    c.step_size.lr0 = 0.1f;
    TrainResult r = train(c, data.train, &data.test);
    MESSAGE("adagrad " << to_string(mode) << " test rmse " << r.test.rmse);
    CHECK(r.test.rmse < 1.15 * g.noise);
    CHECK(r.optimizer_state.at("P").size() == r.parameters.at("P").size());
  }
}

TEST_CASE("hogwild_train --model mf on MovieLens-style files prints and records test rmse") {
  test::TempDir dir;
  RatingsGenerateOptions g;
  g.users = 200, g.items = 100, g.rank = 3, g.ratings = 20000, g.test_ratings = 2000, g.noise = 0.3;
  auto data = generate_ratings(g);
  {  // the training set as MovieLens ratings.csv, the test set as u.data
    std::ofstream csv(dir.file("ratings.csv"));
    csv << "userId,movieId,rating,timestamp\n";
    for (std::size_t r = 0; r < data.train.rows(); ++r)
      csv << data.train.row(r).index[0] << ',' << data.train.row(r).index[1] << ','
          << data.train.label(r) << ",964982703\n";
  }
  write_ratings(data.test, dir.file("u.test"));
  const auto train_cli = test::hogwild_train_path();
  auto r = test::run({train_cli, "--train", dir.file("ratings.csv"), "--test", dir.file("u.test"),
                      "--model", "mf", "--rank", "3", "--l2", "0.01", "--lr", "0.02", "--workers", "2",
                      "--epochs", "8", "--metrics", dir.file("m.jsonl"), "--summary", dir.file("s.json")});
  CAPTURE(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "  rmse "));
  CHECK(contains(r.out, ", test rmse "));
  auto summary = nlohmann::json::parse(test::read_text(dir.file("s.json")));
  CHECK(summary["model"] == "mf");
  REQUIRE(summary.contains("test_rmse"));
  CHECK(summary["test_rmse"].get<double>() < 0.4);
  std::ifstream metrics(dir.file("m.jsonl"));
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["test_rmse"].is_number());
    CHECK(j["test_accuracy"].is_null());
    ++lines;
  }
  CHECK(lines == 8);

  test::write_text(dir.file("bad.data"), "1\t2\t3\t4\n1\t2\n");
  r = test::run({train_cli, "--train", dir.file("bad.data"), "--model", "mf"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, dir.file("bad.data") + ":2: expected user, item, rating"));
  test::write_text(dir.file("x.svm"), "1 1:1\n0 2:1\n");
  r = test::run({train_cli, "--train", dir.file("x.svm"), "--model", "mf"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "model mf needs rating triples"));
  r = test::run({train_cli, "--train", dir.file("u.test"), "--model", "mf", "--rank", "0"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, "--rank 0 is out of range (1 to 1024)"));
}
