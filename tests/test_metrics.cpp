// What an evaluation's metrics line says it scored (Progress, MetricsWriter): the
// samples and time at which the evaluated weights were captured, not when the
// parent got round to evaluating them. A model that adds one to a per-row counter
// for every example it trains makes "the updates in the evaluated weights" a number
// the test can read back (the sum of the counters, reported as the test loss).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hogwild/metrics.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"
#include "trainer/run.hpp"

using namespace hogwild;

namespace {

// One counter per training row; each example adds one to its row's counter (rows
// are visited by one worker at a time under a contiguous partition, so even
// hogwild's plain adds lose nothing). Evaluation: loss = the counters' sum.
class Counter : public ModelBase<Counter> {
 public:
  Counter(std::size_t rows, double spin_us) : rows_(rows), spin_us_(spin_us) {}
  std::string name() const override { return "counter"; }
  LabelKind label_kind() const override { return LabelKind::real; }
  void configure(const Problem&) override {}
  std::vector<TensorSpec> parameters() const override { return {{"count", rows_, {}}}; }
  template <class U>
  double step(const Batch& b, const ParamSet& p, float) {
    // Some work per batch, so that epochs last long enough for timed evaluations.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double, std::micro>(spin_us_);
    while (std::chrono::steady_clock::now() < until) {
    }
    for (std::size_t i = 0; i < b.size; ++i) U::descend(p[0], b.rows[i], -1.0f, 1.0f);
    return 0;
  }
  void predict(const ParamSet& p, RowView, float, double& loss, bool& ok) const {
    double sum = 0;
    for (std::size_t r = 0; r < rows_; ++r) sum += p.data(0)[r];
    loss = sum;
    ok = false;
  }
  bool reports_accuracy() const { return false; }

 private:
  std::size_t rows_;
  double spin_us_;
};

Dataset rows_of_one(std::size_t n) {
  std::vector<float> labels(n, 0.0f), values(n, 1.0f);
  return Dataset::dense(labels, values, 1, "ones");
}

struct Case {
  Mode mode;
  unsigned workers;
  std::size_t merge_every;
};

}  // namespace

TEST_CASE("every metrics line counts the updates its evaluated weights hold, in every mode") {
  constexpr std::size_t rows = 4000, batch = 4;
  const Dataset train_set = rows_of_one(rows), test_set = rows_of_one(1);
  for (const Case& k : {Case{Mode::serial, 1, 0}, Case{Mode::hogwild, 2, 0},
                        Case{Mode::atomic, 2, 0}, Case{Mode::lock, 2, 0},
                        Case{Mode::hogwild, 2, 64}, Case{Mode::atomic, 2, 64}}) {
    INFO(to_string(k.mode) << " x" << k.workers << " merge every " << k.merge_every);
    Counter model(rows, 8);
    TrainConfig c;
    c.mode = k.mode;
    c.workers = k.workers;
    c.partition = Partition::contiguous;
    c.merge_every = k.merge_every;
    c.batch = batch;
    c.epochs = 12;
    c.eval_every = 0.002;
    const TrainResult r = train(c, model, train_set, &test_set);
    // The range is as wide as what the other workers trained while the weights were
    // copied (the copier may even be descheduled): reported, not bounded.
    std::size_t exact = 0, timed = 0;
    std::uint64_t widest = 0;
    for (const Progress& p : r.history) {
      const auto updates = static_cast<std::uint64_t>(std::llround(p.test.loss));
      INFO("line at epoch " << p.epoch << ": samples " << p.samples << " in [" << p.samples_min
                            << ", " << p.samples_max << "], weights hold " << updates);
      CHECK(p.samples_min <= updates);
      CHECK(updates <= p.samples_max);
      CHECK(p.samples_min <= p.samples);
      CHECK(p.samples <= p.samples_max);
      if (p.samples_min == p.samples_max) {
        CHECK(p.samples == updates);
        ++exact;
      }
      widest = std::max(widest, p.samples_max - p.samples_min);
      REQUIRE(p.worker_samples_min.size() == k.workers);
      REQUIRE(p.worker_samples_max.size() == k.workers);
      std::uint64_t low = 0;
      for (auto s : p.worker_samples_min) low += s;
      CHECK(low == p.samples_min);
      if (p.end_of_epoch) CHECK(updates >= static_cast<std::uint64_t>(p.epoch) * rows);
      timed += !p.end_of_epoch;
      CHECK(p.time <= p.reported_time);
      CHECK(p.eval_seconds >= 0);
      CHECK(p.eval_seconds <= p.reported_time);
    }
    MESSAGE(to_string(k.mode) << " x" << k.workers << " merge " << k.merge_every << ": "
                              << r.history.size() << " lines (" << timed << " mid-epoch), "
                              << exact << " exact, widest range " << widest);
    CHECK(r.history.size() >= c.epochs);
    if (k.mode == Mode::serial) CHECK(exact == r.history.size());
    // The final line's weights hold every example of the run.
    CHECK(std::llround(r.history.back().test.loss) == static_cast<long long>(c.epochs * rows));
  }
}

TEST_CASE("a metrics line carries the capture counts, the evaluation's time and when it was done") {
  test::TempDir dir;
  Progress p;
  p.time = 1.5;
  p.epoch = 2;
  p.samples = 105;
  p.samples_min = 100;
  p.samples_max = 110;
  p.worker_samples_min = {50, 50};
  p.worker_samples_max = {55, 55};
  p.eval_seconds = 0.25;
  p.reported_time = 1.9;
  {
    MetricsWriter w(dir.file("m.jsonl"));
    w.write(p);
  }
  std::ifstream in(dir.file("m.jsonl"));
  std::string line;
  REQUIRE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  CHECK(j["time"] == 1.5);
  CHECK(j["samples"] == 105);
  CHECK(j["samples_min"] == 100);
  CHECK(j["samples_max"] == 110);
  CHECK(j["worker_samples_min"] == nlohmann::json({50, 50}));
  CHECK(j["worker_samples_max"] == nlohmann::json({55, 55}));
  CHECK(j["eval_seconds"] == 0.25);
  CHECK(j["reported_time"] == 1.9);
}

TEST_CASE("without a test set, each epoch's line says where that epoch ended, however short the "
          "epochs") {
  // 400 rows of two workers: an epoch lasts tens of microseconds, so several end
  // between two looks of the parent; their lines said the run's end (the same
  // samples each, at 0 samples/s).
  constexpr std::size_t rows = 400;
  const Dataset train_set = rows_of_one(rows);
  for (const Mode mode : {Mode::hogwild, Mode::atomic, Mode::lock}) {
    INFO(to_string(mode));
    Counter model(rows, 0);
    TrainConfig c;
    c.mode = mode;
    c.workers = 2;
    c.epochs = 8;
    const TrainResult r = train(c, model, train_set, nullptr);
    REQUIRE(r.history.size() == c.epochs);
    std::uint64_t before = 0;
    double then = 0;
    for (const Progress& p : r.history) {
      INFO("epoch " << p.epoch << ": samples " << p.samples << " in [" << p.samples_min << ", "
                    << p.samples_max << "] at " << p.time << " s");
      CHECK(p.end_of_epoch);
      // Every worker had finished the epoch; the last one to had trained no further.
      CHECK(p.samples_min >= static_cast<std::uint64_t>(p.epoch) * rows);
      CHECK(p.samples > before);
      CHECK(p.time >= then);
      CHECK(p.recent_samples_per_second > 0);
      before = p.samples;
      then = p.time;
    }
  }
}

TEST_CASE("with a test set, short epochs are each scored on their own snapshot; one the parent "
          "fell too far behind to keep says it is late") {
  // A 400-parameter model: 32 snapshot slots (snapshot_slots). Epochs of 400 rows,
  // two workers: tens of microseconds each. The weights hold `test loss` updates.
  constexpr std::size_t rows = 400;
  const Dataset train_set = rows_of_one(rows), test_set = rows_of_one(1);
  CHECK(detail::snapshot_slots(rows) == detail::kMaxSlots);
  SUBCASE("eight epochs: every line its epoch's weights, none late") {
    Counter model(rows, 0);
    TrainConfig c;
    c.mode = Mode::hogwild;
    c.workers = 2;
    c.partition = Partition::contiguous;  // (a row one worker's: no add is lost)
    c.epochs = 8;
    const TrainResult r = train(c, model, train_set, &test_set);
    REQUIRE(r.history.size() == c.epochs);
    std::uint64_t before = 0;
    for (const Progress& p : r.history) {
      const auto updates = static_cast<std::uint64_t>(std::llround(p.test.loss));
      INFO("epoch " << p.epoch << ": weights hold " << updates << ", samples in [" << p.samples_min
                    << ", " << p.samples_max << "]");
      CHECK_FALSE(p.late);
      CHECK(updates >= static_cast<std::uint64_t>(p.epoch) * rows);
      CHECK(updates >= p.samples_min);
      CHECK(updates <= p.samples_max);
      CHECK(updates > before);  // (the final weights for several epochs before the slots)
      before = updates;
    }
  }
  SUBCASE("a parent held up for 2 s at the first epoch: the epochs past the slots are late") {
    Counter model(rows, 0);
    TrainConfig c;
    c.mode = Mode::hogwild;
    c.workers = 2;
    c.partition = Partition::contiguous;
    c.epochs = 40;
    bool first = true;
    const TrainResult r = train(c, model, train_set, &test_set, [&](const Progress&) {
      // (16000 examples of a counter: milliseconds, seconds under a sanitizer on a
      // loaded machine.)
      if (first) std::this_thread::sleep_for(std::chrono::seconds(2));
      first = false;
    });
    REQUIRE(r.history.size() == c.epochs);
    std::size_t late = 0;
    for (const Progress& p : r.history) {
      const auto updates = static_cast<std::uint64_t>(std::llround(p.test.loss));
      INFO("epoch " << p.epoch << std::string(p.late ? " (late)" : "") << ": weights hold " << updates);
      late += p.late;
      CHECK(updates >= p.samples_min);
      CHECK(updates <= p.samples_max);
      if (p.late) CHECK(updates >= static_cast<std::uint64_t>(p.epoch) * rows);
      const bool says =
          format_progress(p, c.epochs).find("no snapshot of this epoch was kept") != std::string::npos;
      CHECK(says == p.late);
    }
    MESSAGE(late << " late lines of " << r.history.size());
    CHECK(late >= 1);
    CHECK_FALSE(r.history.back().late);  // the last epoch's weights are the final ones
  }
}
