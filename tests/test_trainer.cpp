// The trainer as a library: progress and history, validation, a worker that dies,
// a user-defined model trained exactly like the built-in ones.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

// A user-defined model through the public API: least-squares regression on the
// row's features, its own parameter name, nothing else.
class Ridge : public ModelBase<Ridge> {
 public:
  std::string name() const override { return "ridge"; }
  LabelKind label_kind() const override { return LabelKind::real; }
  void configure(const Problem& p) override { d_ = p.features; }
  std::vector<TensorSpec> parameters() const override { return {{"theta", d_, {}}}; }
  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr) {
    double loss = 0;
    for (std::size_t i = 0; i < b.size; ++i) {
      const float r = row_dot<U>(p.data(0), b.row(i)) - b.target(i);
      loss += 0.5 * r * r;
      row_descend<U>(p[0], 0, r / static_cast<float>(b.size), 0, b.row(i), lr);
    }
    return loss;
  }
  void predict(const ParamSet& p, RowView x, float y, double& loss, bool& ok) const {
    const float r = row_dot<SerialUpdate>(p.data(0), x) - y;
    loss = 0.5 * r * r;
    ok = false;
  }
  bool reports_accuracy() const { return false; }

 private:
  std::size_t d_ = 0;
};

// A model whose worker 1 dies on its first step: abort() in every row it owns.
class Crashy : public ModelBase<Crashy> {
 public:
  explicit Crashy(std::size_t crash_from) : crash_from_(crash_from) {}
  std::string name() const override { return "crashy"; }
  LabelKind label_kind() const override { return LabelKind::binary; }
  void configure(const Problem& p) override { d_ = p.features; }
  std::vector<TensorSpec> parameters() const override { return {{"w", d_, {}}}; }
  template <class U>
  double step(const Batch& b, const ParamSet&, float) {
    if (b.rows[0] >= crash_from_) std::abort();
    return 0;
  }
  void predict(const ParamSet&, RowView, float, double& loss, bool& ok) const {
    loss = 0;
    ok = true;
  }

 private:
  std::size_t crash_from_, d_ = 0;
};

}  // namespace

TEST_CASE("history has one evaluation per epoch, loss falls, samples add up") {
  auto [tr, te] = test::generated_problem(8000, 2000, 1000, 15, 0.05, 1);
  TrainConfig c;
  c.mode = Mode::hogwild;
  c.workers = 2;
  c.epochs = 4;
  c.step_size.lr0 = 0.5f;
  std::vector<Progress> seen;
  auto r = train(c, tr, &te, [&](const Progress& p) { seen.push_back(p); });
  REQUIRE(seen.size() == 4);
  for (unsigned e = 0; e < 4; ++e) {
    CHECK(seen[e].epoch == e + 1);
    CHECK(seen[e].end_of_epoch);
    CHECK(std::isfinite(seen[e].test.loss));
  }
  CHECK(seen.back().train_loss < seen.front().train_loss);
  CHECK(seen.back().test.loss < seen.front().test.loss);
  CHECK(r.samples == 4 * tr.rows());
  CHECK(r.train_seconds > 0);
  CHECK(r.samples_per_second > 0);
  CHECK(r.peak_rss_bytes > 0);
  CHECK(r.parameters.count("w") == 1);
  CHECK(r.parameters.at("w").size() == 1000);
  CHECK(r.parameters.count("b") == 1);
}

TEST_CASE("a user-defined model trains through the same trainer in every mode") {
  // y = 2 x0 - x1 on dense rows.
  std::vector<float> labels, values;
  Rng rng(4);
  for (int i = 0; i < 4000; ++i) {
    const float a = static_cast<float>(rng.normal()), b = static_cast<float>(rng.normal());
    values.push_back(a);
    values.push_back(b);
    labels.push_back(2 * a - b);
  }
  Dataset d = Dataset::dense(labels, values, 2, "linear");
  for (Mode m : {Mode::serial, Mode::hogwild, Mode::atomic, Mode::lock}) {
    Ridge model;
    TrainConfig c;
    c.mode = m;
    c.workers = 2;
    c.epochs = 3;
    c.step_size.lr0 = 0.05f;
    auto r = train(c, model, d, &d);
    INFO(to_string(m));
    CHECK(r.parameters.at("theta")[0] == doctest::Approx(2.0).epsilon(0.02));
    CHECK(r.parameters.at("theta")[1] == doctest::Approx(-1.0).epsilon(0.02));
    CHECK(r.test.rmse < 0.05);
    CHECK(std::isnan(r.test.accuracy));
  }
}

TEST_CASE("a worker that dies ends the run with an error naming it; nothing is left behind") {
  auto [tr, te] = test::generated_problem(2000, 100, 100, 5, 0.0, 2);
  const auto before = test::our_shm_entries();
  Crashy model(1000);  // rows 1000.. belong to worker 1 of 2
  TrainConfig c;
  c.mode = Mode::hogwild;
  c.workers = 2;
  c.epochs = 50;
  try {
    train(c, model, tr, &te);
    FAIL("expected WorkerError");
  } catch (const WorkerError& e) {
    const std::string w = e.what();
    MESSAGE(w);
    CHECK(w.find("worker 1") != std::string::npos);
    CHECK(w.find("signal 6") != std::string::npos);
    CHECK(e.exit_code() == kExitWorkerFailed);
  }
  CHECK(test::our_shm_entries() == before);
}

TEST_CASE("invalid configurations are refused with the option's name") {
  auto [tr, te] = test::generated_problem(10, 5, 10, 2, 0.0, 2);
  auto expect = [&](TrainConfig c, const char* needle) {
    try {
      train(c, tr, &te);
      FAIL("expected ConfigError for " << needle);
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  TrainConfig c;
  c.workers = 0;
  expect(c, "--workers");
  c = {};
  c.workers = 11;
  expect(c, "more than the 10 training rows");
  c = {};
  c.epochs = 0;
  expect(c, "--epochs");
  c = {};
  c.step_size.lr0 = -1;
  expect(c, "--lr");
  c = {};
  c.step_size.decay = 1.5f;
  expect(c, "--lr-decay");
  c = {};
  c.batch = 0;
  expect(c, "--batch");
  c = {};
  c.model = "nope";
  expect(c, "unknown model");
}

TEST_CASE("divergence is reported with the epoch and a hint") {
  auto [tr, te] = test::generated_problem(2000, 100, 50, 5, 0.0, 2);
  TrainConfig c;
  c.model = "squared";
  c.mode = Mode::serial;
  c.epochs = 3;
  c.step_size.lr0 = 1e30f;
  try {
    train(c, tr, &te);
    FAIL("expected divergence");
  } catch (const Error& e) {
    const std::string w = e.what();
    CHECK(w.find("diverged") != std::string::npos);
    CHECK(w.find("--lr") != std::string::npos);
  }
}

TEST_CASE("timed evaluations arrive between epochs with --eval-every") {
  auto [tr, te] = test::generated_problem(200000, 1000, 5000, 30, 0.05, 5);
  TrainConfig c;
  c.workers = 2;
  c.epochs = 2;
  c.eval_every = 0.02;
  auto r = train(c, tr, &te);
  std::size_t timed = 0;
  for (auto& p : r.history) timed += !p.end_of_epoch;
  MESSAGE(timed << " timed evaluations in " << r.train_seconds << " s");
  CHECK(timed >= 1);
  CHECK(r.history.back().end_of_epoch);
}

TEST_CASE("metrics lines and the summary are valid JSON with the documented fields") {
  auto [tr, te] = test::generated_problem(2000, 500, 100, 5, 0.05, 2);
  test::TempDir dir;
  TrainConfig c;
  c.workers = 2;
  c.epochs = 3;
  TrainResult r;
  {
    MetricsWriter w(dir.file("m.jsonl"));
    r = train(c, tr, &te, [&](const Progress& p) { w.write(p); });
  }
  auto text = test::read_text(dir.file("m.jsonl"));
  std::size_t lines = 0;
  for (std::size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos; ++pos) ++lines;
  CHECK(lines == 3);
  for (const char* key : {"\"time\"", "\"epoch\"", "\"samples\"", "\"train_loss\"", "\"test_loss\"",
                          "\"test_accuracy\"", "\"samples_per_second\""})
    CHECK(text.find(key) != std::string::npos);
  write_file_atomically(dir.file("s.json"), summary_json(c, r, "a", "b"));
  auto s = test::read_text(dir.file("s.json"));
  for (const char* key : {"model", "mode", "workers", "epochs", "batch", "lr", "seed", "train_seconds",
                          "samples", "samples_per_second", "test_accuracy", "test_loss", "peak_rss_bytes"})
    CHECK(s.find(std::string("\"") + key + "\"") != std::string::npos);
  CHECK_THROWS_AS(MetricsWriter(dir.file("no/such/dir/m.jsonl")), IoError);
}
