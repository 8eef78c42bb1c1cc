// --mode simulated: K virtual workers on a simulated clock. One worker is serial
// bit for bit; a seed repeats its weights; atomic loses nothing where hogwild loses
// writes; lock runs one update at a time; the clock is the cost model's sum; the
// cost model's file is checked like any input.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/trainer.hpp"
#include "modes/simulated/simulator.hpp"
#include "ridge.hpp"
#include "support.hpp"
#include "trainer/epoch_order.hpp"

using namespace hogwild;

namespace {

TrainConfig simulated(unsigned workers, const std::string& access = "hogwild") {
  TrainConfig c = test::sgd_config(Mode::simulated, workers);
  c.epochs = 3;
  c.simulate_access = access;
  c.digest_weights = true;
  return c;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("one simulated worker ends with serial's weights, bit for bit") {
  auto [train, test] = test::generated_problem(3000, 500, 400, 15, 0.05, 3);
  for (const auto opt : {Optimizer::sgd, Optimizer::adagrad}) {
    CAPTURE(static_cast<int>(opt));
    TrainConfig s = simulated(1);
    s.mode = Mode::serial;
    s.optimizer = opt;
    TrainConfig k1 = simulated(1);
    k1.optimizer = opt;
    const auto a = hogwild::train(s, train, &test);
    const auto b = hogwild::train(k1, train, &test);
    REQUIRE(a.weights_sha256.size() == 64);
    CHECK(b.weights_sha256 == a.weights_sha256);
    CHECK(b.train_loss == a.train_loss);
    CHECK(b.simulation.lost_writes == 0);
    CHECK(b.staleness.lag.max == 0);
    CHECK(b.simulation.updates == a.samples);
  }
}

TEST_CASE("a resumed simulated run: its rate is its own part's, and its access and costs must match") {
  // The checkpoint holds no simulated events: the resumed run's clock starts again
  // at 0, so its rate is the examples it simulated over that clock (it was every
  // example of the run over it, about twice the rate for a run resumed halfway).
  auto [train, test] = test::generated_problem(3000, 500, 400, 15, 0.05, 3);
  test::TempDir dir;
  TrainConfig c = simulated(4);
  c.epochs = 2;
  c.checkpoint = dir.file("ck.bin");
  const auto first = hogwild::train(c, train, &test);
  c.epochs = 4;
  c.resume = c.checkpoint;
  const auto resumed = hogwild::train(c, train, &test);
  CHECK(resumed.samples == 4 * train.rows());
  CHECK(resumed.simulation.examples == 2 * train.rows());
  const double rate = nlohmann::json::parse(summary_json(c, resumed, "", ""))["simulation"]
                          ["examples_per_second"].get<double>();
  CHECK(rate == doctest::Approx(static_cast<double>(2 * train.rows()) / resumed.simulation.seconds));
  CHECK(rate == doctest::Approx(static_cast<double>(first.samples) / first.simulation.seconds).epsilon(0.2));
  // Another access, or another cost model, is another study: refused.
  c.epochs = 6;
  c.simulate_access = "atomic";
  CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test),
                       doctest::Contains("it was written with --simulate-access hogwild; this run has "
                                         "--simulate-access atomic"), ConfigError);
  c.simulate_access = "hogwild";
  write(dir.file("costs.json"), "{\"write_ns\": 5}");
  c.cost_model = dir.file("costs.json");
  CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test), doctest::Contains("--cost-model"), ConfigError);
}

TEST_CASE("a seed repeats a simulated run's weights; another seed does not") {
  auto [train, test] = test::generated_problem(2000, 400, 300, 15, 0.05, 4);
  TrainConfig c = simulated(16);
  const auto a = hogwild::train(c, train, &test);
  const auto b = hogwild::train(c, train, &test);
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.simulation.lost_writes == b.simulation.lost_writes);
  CHECK(a.staleness.lag.mean == b.staleness.lag.mean);
  c.seed += 1;
  CHECK(hogwild::train(c, train, &test).weights_sha256 != a.weights_sha256);
  // And its racing workers end elsewhere than one worker.
  CHECK(hogwild::train(simulated(1), train, &test).weights_sha256 != a.weights_sha256);
}

TEST_CASE("atomic loses no write; hogwild's many workers lose some, counted with their mass") {
  // Few features: every example writes the bias and shares most of its features,
  // so 64 workers' writes collide.
  auto [train, test] = test::generated_problem(3000, 500, 40, 10, 0.05, 5);
  const auto atomic = hogwild::train(simulated(64, "atomic"), train, &test);
  const auto racing = hogwild::train(simulated(64, "hogwild"), train, &test);
  CHECK(atomic.simulation.lost_writes == 0);
  CHECK(atomic.simulation.lost_mass == 0);
  CHECK(atomic.simulation.writes > atomic.simulation.updates);
  CHECK(racing.simulation.lost_writes > 0);
  CHECK(racing.simulation.lost_mass > 0);
  CHECK(racing.conflicts.conflicts == racing.simulation.lost_writes);
  // Both see the same schedule of reads: the staleness is the workers', not the access's.
  CHECK(atomic.staleness.lag.mean > 10);
  CHECK(atomic.staleness.overlap.max >= atomic.staleness.lag.max);
  // The same writes, made: every update's writes are counted once.
  CHECK(racing.simulation.writes == atomic.simulation.writes);
  // Sixty-four workers' staleness costs this problem little at lr 0.5.
  CHECK(atomic.test.accuracy > 0.7);
}

TEST_CASE("lock: one update at a time, none lost, nothing stale") {
  auto [train, test] = test::generated_problem(2000, 400, 40, 10, 0.05, 6);
  const auto r = hogwild::train(simulated(8, "lock"), train, &test);
  CHECK(r.simulation.lost_writes == 0);
  CHECK(r.staleness.lag.max == 0);
  CHECK(r.staleness.overlap.max == 0);
  CHECK(r.simulation.updates == r.samples);
  // Serialised: the clock is at least every update's write cost one after another
  // (each example writes its 10 non-zeros and the bias at the built-in write_ns).
  CHECK(r.simulation.seconds >= static_cast<double>(r.samples) * 11 * 2.9e-9);
}

TEST_CASE("striped: one stripe is lock, bit for bit; more stripes lose nothing inside them") {
  auto [train, test] = test::generated_problem(2000, 400, 400, 10, 0.05, 6);
  const auto lock = hogwild::train(simulated(8, "lock"), train, &test);
  TrainConfig one = simulated(8, "striped");
  one.mode_options["stripes"] = 1;
  const auto striped1 = hogwild::train(one, train, &test);
  CHECK(striped1.weights_sha256 == lock.weights_sha256);
  CHECK(striped1.simulation.seconds == lock.simulation.seconds);
  CHECK(striped1.staleness.lag.max == 0);
  // 256 stripes over 400 features: batches on disjoint stripes run at once (stale
  // reads, a faster clock than lock's), and without a bias every write is a feature's,
  // inside a stripe its writer holds: none lost, where hogwild's loses some.
  one.model_options.bias = false;
  TrainConfig many = simulated(8, "striped");
  many.model_options.bias = false;
  many.mode_options["stripes"] = 256;
  TrainConfig racing = simulated(8, "hogwild");
  racing.model_options.bias = false;
  const auto striped = hogwild::train(many, train, &test);
  const auto hogwild = hogwild::train(racing, train, &test);
  CHECK(striped.simulation.lost_writes == 0);
  CHECK(striped.staleness.lag.max > 0);
  CHECK(striped.simulation.seconds < hogwild::train(one, train, &test).simulation.seconds);
  CHECK(striped.simulation.writes == hogwild.simulation.writes);
  CHECK(hogwild.simulation.lost_writes > 0);
  CHECK(striped.test.accuracy > 0.7);
  // With a bias, every batch writes it holding no stripe of its own: it races.
  many.model_options.bias = true;
  CHECK(hogwild::train(many, train, &test).simulation.lost_writes > 0);
}

TEST_CASE("the sampling instruments' view of the simulated schedule, beside the exact figures") {
  auto [train, test] = test::generated_problem(3000, 500, 40, 10, 0.05, 5);
  TrainConfig c = simulated(16);
  const auto r = hogwild::train(c, train, &test);
  const auto& in = r.simulation.instruments;
  // --telemetry's sample: about 1 update in 64 (geometric gaps), its mean lag near
  // the exact one, and nothing it saw beyond the exact maximum.
  CHECK(in.at("telemetry_every") == 64);
  CHECK(in.at("sampled_updates") > static_cast<double>(r.simulation.updates) / 64 / 2);
  CHECK(in.at("sampled_updates") < static_cast<double>(r.simulation.updates) / 64 * 2);
  CHECK(in.at("sampled_lag_mean") == doctest::Approx(r.staleness.lag.mean).epsilon(0.3));
  CHECK(in.at("sampled_lag_max") <= static_cast<double>(r.staleness.lag.max));
  // --conflicts' sample: the bias and the hot features, whose writes collide far
  // more often than the average write.
  CHECK(in.at("conflict_coordinates") > 0);
  CHECK(in.at("conflict_writes") > 0);
  CHECK(in.at("conflict_writes") <= static_cast<double>(r.simulation.writes));
  CHECK(in.at("conflict_conflicts") <= static_cast<double>(r.simulation.lost_writes));
  CHECK(in.at("conflict_conflicts") / in.at("conflict_writes") >
        static_cast<double>(r.simulation.lost_writes) / static_cast<double>(r.simulation.writes));
  // Sampling every update, the telemetry's figures are the exact ones.
  c.telemetry_every = 1;
  const auto every = hogwild::train(c, train, &test);
  CHECK(every.weights_sha256 == r.weights_sha256);  // (the instruments change nothing)
  CHECK(every.simulation.instruments.at("sampled_updates") == static_cast<double>(every.simulation.updates));
  CHECK(every.simulation.instruments.at("sampled_lag_mean") == doctest::Approx(every.staleness.lag.mean));
  CHECK(every.simulation.instruments.at("sampled_lag_max") == static_cast<double>(every.staleness.lag.max));
}

TEST_CASE("each evaluation carries the simulated clock; other modes' none") {
  auto [train, test] = test::generated_problem(1000, 200, 40, 10, 0.05, 7);
  std::vector<double> clock;
  const auto r = hogwild::train(simulated(8), train, &test,
                                [&](const Progress& p) { clock.push_back(p.simulated_time); });
  REQUIRE(clock.size() >= 3);
  for (std::size_t i = 1; i < clock.size(); ++i) CHECK(clock[i] > clock[i - 1]);
  CHECK(clock.front() > 0);
  CHECK(clock.back() == r.simulation.seconds);
  TrainConfig s = simulated(1);
  s.mode = Mode::serial;
  hogwild::train(s, train, &test, [&](const Progress& p) { CHECK(p.simulated_time < 0); });
}

TEST_CASE("lock is serial in the order the workers took the lock, bit for bit") {
  // Eight workers under one lock for an epoch: the order their updates ran in is
  // recorded; serial then trains a copy of the rows placed so that its own shuffled
  // order meets them in that order, and ends with the same weights.
  auto [train, test] = test::generated_problem(2000, 400, 40, 10, 0.05, 6);
  TrainConfig c = simulated(8, "lock");
  c.epochs = 1;
  std::vector<std::uint32_t> ran;
  detail::simulated_reads = &ran;
  const auto locked = hogwild::train(c, train, &test);
  detail::simulated_reads = nullptr;
  REQUIRE(ran.size() == train.rows());
  std::vector<std::uint32_t> serial_order;
  detail::epoch_rows(c.partition, train.rows(), 1, 0, c.seed, 0, serial_order);
  // Row serial_order[i] of the copy is row ran[i] of the data.
  std::vector<std::uint32_t> source(train.rows());
  for (std::size_t i = 0; i < ran.size(); ++i) source[serial_order[i]] = ran[i];
  std::vector<float> labels;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  for (const std::uint32_t r : source) {
    const RowView row = train.row(r);
    labels.push_back(train.labels()[r]);
    indices.insert(indices.end(), row.index, row.index + row.nnz);
    values.insert(values.end(), row.value, row.value + row.nnz);
    offsets.push_back(indices.size());
  }
  const Dataset reordered = Dataset::sparse(labels, offsets, indices, values, train.cols(), "reordered");
  TrainConfig s = c;
  s.mode = Mode::serial;
  s.workers = 1;
  s.simulate_access = "hogwild";  // the default: an option of the simulated mode
  const auto serial = hogwild::train(s, reordered, &test);
  CHECK(serial.weights_sha256 == locked.weights_sha256);
  // The order was one of the workers' interleavings: not serial's own.
  std::vector<std::uint32_t> own;
  detail::epoch_rows(c.partition, train.rows(), 1, 0, c.seed, 0, own);
  CHECK(ran != own);
}

TEST_CASE("the simulated clock is the cost model's: per worker, in parallel, with stragglers") {
  test::TempDir dir;
  auto [train, test] = test::generated_problem(4000, 400, 300, 10, 0.05, 7);
  write(dir.file("costs.json"), R"({"example_ns": 100, "idle_ns": 0, "read_ns": 0, "write_ns": 0,
                                   "coherence_ns": 0, "machine": "a test"})");
  TrainConfig c = simulated(1);
  c.cost_model = dir.file("costs.json");
  c.partition = Partition::contiguous;
  const double n = 4000.0 * c.epochs;
  CHECK(hogwild::train(c, train, &test).simulation.seconds == doctest::Approx(n * 100e-9));
  c.workers = 4;  // four at once: a quarter of the time
  CHECK(hogwild::train(c, train, &test).simulation.seconds == doctest::Approx(n / 4 * 100e-9));
  write(dir.file("slow.json"), R"({"example_ns": 100, "idle_ns": 0, "read_ns": 0, "write_ns": 0,
                                   "coherence_ns": 0, "speed": [2]})");
  c.cost_model = dir.file("slow.json");  // worker 0 twice as slow: the epoch waits for it
  const auto slow = hogwild::train(c, train, &test);
  CHECK(slow.simulation.seconds == doctest::Approx(n / 4 * 200e-9));
  const auto j = nlohmann::json::parse(summary_json(c, slow, "train", "test"));
  CHECK(j["simulation"]["cost_model"]["source"] == c.cost_model);
  CHECK(j["simulation"]["cost_model"]["speed"] == nlohmann::json::array({2.0}));
  CHECK(j["staleness"]["lag"]["samples"] == slow.samples);
  // The file is read once, at the first epoch: gone after it, the run and its
  // summary go on with the costs it read.
  const auto gone = hogwild::train(c, train, &test, [&](const Progress& p) {
    if (p.epoch == 1) std::filesystem::remove(c.cost_model);
  });
  CHECK(gone.simulation.seconds == doctest::Approx(n / 4 * 200e-9));
  CHECK(nlohmann::json::parse(summary_json(c, gone, "train", "test"))["simulation"]["cost_model"]
            ["example_ns"] == 100.0);
}

TEST_CASE("a contended line moves to one writer at a time (the cost model's queue)") {
  // Every update writes the bias; its line's moves cost 1 us and nothing else costs
  // much. Sixty-four workers queue for that line: the clock is at least a move for
  // every update that found the line another's. Without the queue the moves overlap.
  test::TempDir dir;
  auto [train, test] = test::generated_problem(2000, 400, 4000, 5, 0.05, 8);
  write(dir.file("queue.json"), R"({"example_ns": 10, "idle_ns": 10, "read_ns": 1, "write_ns": 1,
                                   "coherence_ns": 1000, "queue": true})");
  write(dir.file("no-queue.json"), R"({"example_ns": 10, "idle_ns": 10, "read_ns": 1, "write_ns": 1,
                                      "coherence_ns": 1000})");  // (the built-in: no queue)
  TrainConfig c = simulated(64);
  c.cost_model = dir.file("queue.json");
  const auto queued = hogwild::train(c, train, &test);
  c.cost_model = dir.file("no-queue.json");
  const auto free = hogwild::train(c, train, &test);
  const double updates = static_cast<double>(queued.simulation.updates);
  CHECK(queued.simulation.seconds >= 0.9 * updates * 1001e-9);
  CHECK(free.simulation.seconds < queued.simulation.seconds / 10);
  CHECK(free.simulation.seconds < updates * 1001e-9 / 10);
  // A write loads at once and stores when its line comes: a store of another worker
  // queued before it lands in between and is lost, as on hardware (a write that
  // loaded only once the line came would lose nothing).
  CHECK(queued.simulation.lost_writes > 1000);
  // One worker never moves a line: the queue changes nothing there.
  c.workers = 1;
  const double one = hogwild::train(c, train, &test).simulation.seconds;
  c.cost_model = dir.file("queue.json");
  CHECK(hogwild::train(c, train, &test).simulation.seconds == one);
}

TEST_CASE("a line another worker wrote many of its writes ago costs no move (recent_writes)") {
  // With coherence_ns 0 a move costs nothing, so every count of recent writes runs
  // the same schedule, and the moves it counts can only grow with the count: the
  // lines the other worker has written fewer than N writes ago, N = 1, 16, all. A
  // count beyond every worker's writes is every move (0).
  test::TempDir dir;
  auto [train, test] = test::generated_problem(2000, 400, 64, 5, 0.05, 8);  // 64 features: 4 lines
  const auto run = [&, &train = train, &test = test](const std::string& recent, const std::string& ns,
                                                     unsigned workers) {
    write(dir.file("c.json"), R"({"example_ns": 1, "idle_ns": 1, "read_ns": 1, "write_ns": 1,
                                 "coherence_ns": )" + ns + R"(, "recent_writes": )" + recent + "}");
    TrainConfig c = simulated(workers);
    c.cost_model = dir.file("c.json");
    return hogwild::train(c, train, &test);
  };
  const auto kept = run("0", "0", 2), one = run("1", "0", 2), some = run("16", "0", 2),
             all = run("4294967295", "0", 2);
  CHECK(one.weights_sha256 == kept.weights_sha256);  // one schedule
  CHECK(some.weights_sha256 == kept.weights_sha256);
  CHECK(kept.simulation.moves > kept.simulation.writes / 10);
  CHECK(one.simulation.moves < some.simulation.moves);
  CHECK(some.simulation.moves < kept.simulation.moves);
  CHECK(all.simulation.moves == kept.simulation.moves);
  CHECK(run("16.0", "0", 2).simulation.moves == some.simulation.moves);  // (as a summary writes it)
  // With a cost the moves it no longer counts are time saved: the line's other
  // writes run a write's cost, as one worker's.
  const auto costly = run("0", "100", 2), cheap = run("1", "100", 2);
  CHECK(cheap.simulation.moves < costly.simulation.moves);
  CHECK(cheap.simulation.seconds < costly.simulation.seconds);
  // One worker never moves a line: the count changes nothing there.
  CHECK(run("1", "100", 1).simulation.seconds == run("0", "100", 1).simulation.seconds);
  CHECK(run("0", "100", 1).simulation.moves == 0);
  // The count is in the summary.
  CHECK(nlohmann::json::parse(summary_json(simulated(2), one, "train", "test"))["simulation"]["cost_model"]
            ["recent_writes"] == 1.0);
}

TEST_CASE("a summary's cost model is a cost-model file: the same run again, bit for bit") {
  // Every key set away from the built-in, the queue and recent_writes included: the
  // block the summary writes, saved as a file, runs the same schedule.
  test::TempDir dir;
  auto [train, test] = test::generated_problem(1500, 200, 64, 5, 0.05, 8);
  write(dir.file("costs.json"), R"({"example_ns": 3, "idle_ns": 40, "read_ns": 2, "write_ns": 1.5,
                                   "coherence_ns": 25, "recent_writes": 8, "queue": true,
                                   "speed": [1, 1.5], "machine": "a test"})");
  TrainConfig c = simulated(3);
  c.cost_model = dir.file("costs.json");
  const auto first = hogwild::train(c, train, &test);
  const auto block = nlohmann::json::parse(summary_json(c, first, "train", "test"))["simulation"]["cost_model"];
  CHECK(block["queue"] == true);
  CHECK(block["recent_writes"] == 8);
  CHECK(block["source"] == c.cost_model);
  write(dir.file("again.json"), block.dump());
  c.cost_model = dir.file("again.json");
  const auto again = hogwild::train(c, train, &test);
  CHECK(again.weights_sha256 == first.weights_sha256);
  CHECK(again.simulation.seconds == first.simulation.seconds);
  CHECK(again.simulation.moves == first.simulation.moves);
  CHECK(again.simulation.lost_writes == first.simulation.lost_writes);
  // (A different schedule would show: the queue off moves the clock.)
  auto off = block;
  off["queue"] = false;
  write(dir.file("off.json"), off.dump());
  c.cost_model = dir.file("off.json");
  CHECK(hogwild::train(c, train, &test).simulation.seconds != first.simulation.seconds);
}

TEST_CASE("a simulated clock past its limit stops the run with its message, not a crash") {
  // 1e16 ns an example: the first update of two workers ends 2,800 hours on, past
  // the clock's 4.9 hours.
  test::TempDir dir;
  auto [train, test] = test::generated_problem(200, 50, 20, 5, 0.05, 8);
  write(dir.file("slow.json"), R"({"example_ns": 1e16})");
  for (const unsigned workers : {1u, 2u, 64u}) {
    TrainConfig c = simulated(workers);
    c.cost_model = dir.file("slow.json");
    CHECK_THROWS_WITH(hogwild::train(c, train, &test),
                      doctest::Contains("the simulated clock passed 4.9 hours"));
  }
}

TEST_CASE("a cost model's file is checked like any input; the instruments it replaces are refused") {
  test::TempDir dir;
  auto [train, test] = test::generated_problem(500, 100, 50, 5, 0.05, 8);
  TrainConfig c = simulated(4);
  const auto refused = [&, &train = train, &test = test](const std::string& text, const std::string& says) {
    write(dir.file("c.json"), text);
    c.cost_model = dir.file("c.json");
    const std::string message = dir.file("c.json") + ": " + says;
    CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test), doctest::Contains(message.c_str()),
                         ConfigError);
  };
  refused("{", "not JSON");
  refused("[1, 2]", "a JSON object of costs");
  refused(R"({"write_ns": -1})", "write_ns must be a number of nanoseconds >= 0, not -1");
  refused(R"({"read_ns": "fast"})", "read_ns must be a number");
  refused(R"({"speed": [1, 0]})", "speed[1] must be a number > 0, not 0");
  refused(R"({"speed": 2})", "speed must be an array");
  refused(R"({"write": 3})", "unknown key write");
  refused(R"({"write_ns": 3, "idle_ns": 2, "write_ns": 30})", "write_ns is given twice");
  refused(R"({"queue": 1})", "queue must be true or false, not 1");
  refused(R"({"recent_writes": -1})", "recent_writes must be a whole number of writes");
  refused(R"({"recent_writes": 4294967296})",
          "recent_writes must be a whole number of writes from 0 to 4294967295, not 4294967296");
  refused(R"({"recent_writes": 1.5})", "recent_writes must be a whole number");
  refused(R"({"recent_writes": "64"})", "recent_writes must be a whole number");
  c.cost_model = dir.file("absent.json");
  CHECK_THROWS_AS(hogwild::train(c, train, &test), IoError);
  c.cost_model.clear();
  c.simulate_access = "stripy";
  CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test),
                       doctest::Contains("choose hogwild, atomic, lock or striped"), ConfigError);
  c.simulate_access = "lock";
  c.mode_options["stripes"] = 4;  // striped's stripes, to an access that has none
  CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test),
                       doctest::Contains("--stripes applies to --simulate-access striped"),
                       ConfigError);
  c.mode_options.clear();
  c.simulate_access = "hogwild";
  c.telemetry = true;
  CHECK_THROWS_WITH_AS(hogwild::train(c, train, &test), doctest::Contains("exactly"), ConfigError);
  c.telemetry = false;
  c.merge_every = 64;
  CHECK_THROWS_AS(hogwild::train(c, train, &test), ConfigError);
}

TEST_CASE("hogwild_train --mode simulated: the line, the summary, and exit 2 for a bad cost model" *
          doctest::test_suite("cli")) {
  test::TempDir dir;
  const auto [train, test] = test::problem_files(dir, 2000);
  const auto out = test::run_train({"--train", train, "--test", test, "--mode", "simulated",
                                    "--workers", "256", "--epochs", "1", "--summary",
                                    dir.file("s.json"), "--digest"});
  REQUIRE(out.exit_code == 0);
  CHECK(out.out.find("simulated 256 worker(s) (hogwild)") != std::string::npos);
  const auto j = nlohmann::json::parse(test::read_text(dir.file("s.json")));
  CHECK(j["workers"] == 256);
  CHECK(j["simulation"]["updates"] == 2000);
  CHECK(j["weights_sha256"].get<std::string>().size() == 64);
  CHECK(j["staleness"]["lag"]["max"].get<int>() > 0);
  write(dir.file("bad.json"), R"({"coherence_ns": null})");
  const auto bad = test::run_train({"--train", train, "--mode", "simulated", "--workers", "4",
                                    "--cost-model", dir.file("bad.json")});
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("bad.json: coherence_ns must be a number") != std::string::npos);
}

TEST_CASE("an analytic case: least squares in rounds of K reads of one iterate, as the recurrence") {
  // A user's model (tests/ridge.hpp, least squares, its one tensor "theta"): the
  // simulator runs every model compiled for the access policies, built in or not.
  register_model("ridge", [](const ModelOptions&) { return std::make_unique<test::Ridge<>>(); });
  // One weight, every row x = 1 with target y, squared loss, a fixed step:
  // serial SGD is e <- (1 - lr) e for e = w - y. With K workers of equal costs whose
  // reads all come after the round's writes (idle_ns 1, the rest of an update
  // example_ns), each round's K updates read the same iterate, a delay of up to
  // K - 1 updates: e_{r+1} = (1 - K lr) e_r, so after R rounds e = (1 - K lr)^R e_0.
  test::TempDir dir;
  write(dir.file("rounds.json"), R"({"example_ns": 100, "idle_ns": 1, "read_ns": 0,
                                     "write_ns": 0, "coherence_ns": 0})");
  constexpr float y = 2.f;
  constexpr std::size_t rows = 120;
  const std::vector<float> labels(rows, y), values(rows, 1.f);
  const Dataset data = Dataset::dense(labels, values, 1, "x = 1");
  for (const unsigned K : {1u, 2u, 4u, 8u}) {
    CAPTURE(K);
    TrainConfig c = simulated(K);
    c.model = "ridge";
    c.epochs = 1;
    c.step_size.lr0 = 0.02f;
    c.step_size.decay = 1;
    c.cost_model = dir.file("rounds.json");
    const auto r = hogwild::train(c, data, &data);
    const double rounds = static_cast<double>(rows / K);
    const double expected = y + std::pow(1.0 - K * 0.02, rounds) * (0.0 - y);
    REQUIRE(r.parameters.count("theta"));
    CHECK(r.parameters.at("theta")[0] == doctest::Approx(expected).epsilon(1e-5));
    // Every update but a round's first saw the round's earlier ones land after its read.
    CHECK(r.staleness.lag.max == K - 1);
    CHECK(r.staleness.lag.mean == doctest::Approx((K - 1) / 2.0));
  }
}
