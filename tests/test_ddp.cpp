// The synchronous modes. --mode ddp between real forked workers: the same weights
// bit for bit run to run; W workers with mini-batches of B take serial mode's steps
// with mini-batches of W B (to float reordering); --accumulate; convergence beside
// serial; a dead worker stops the group promptly and, with restarts left, the whole
// group starts again. --mode dp: T threads on a mini-batch of B take serial's step
// on it (to float reordering), the same floats run after run.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <signal.h>

#include <filesystem>
#include <functional>
#include <new>
#include <thread>

#include "comm/gloo.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"
#include "comm_suite.hpp"
#include "ridge.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

TrainConfig ddp(const std::string& model, unsigned workers, std::size_t batch, float lr,
                unsigned epochs) {
  TrainConfig c;
  c.model = model;
  c.mode = Mode::ddp;
  c.workers = workers;
  c.batch = batch;
  c.epochs = epochs;
  c.step_size.lr0 = lr;
  c.step_size.decay = 0.9f;
  c.seed = 5;
  if (model == "mlp") c.model_options.hidden = {16, 8};
  return c;
}

bool same_bits(const TrainResult& a, const TrainResult& b) {
  if (a.parameters.size() != b.parameters.size()) return false;
  for (const auto& [name, w] : a.parameters) {
    const auto& v = b.parameters.at(name);
    if (w.size() != v.size() || std::memcmp(w.data(), v.data(), w.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

// The largest |a - b| / (1 + |a|) over every parameter.
double farthest(const TrainResult& a, const TrainResult& b) {
  double worst = 0;
  for (const auto& [name, w] : a.parameters) {
    const auto& v = b.parameters.at(name);
    REQUIRE(v.size() == w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::fabs(double(w[i]) - v[i]) / (1 + std::fabs(double(w[i]))));
  }
  return worst;
}

// Three classes of Gaussian rows with shifted means (dense, learnable).
Dataset blobs(std::size_t n, std::uint64_t seed) {
  std::vector<float> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<float>(i % 3);
  Dataset d = test::gaussian_rows(labels, 12, seed);
  return d;
}

// True (after test::skip) when this build has no Gloo.
bool skip_without_gloo() {
  if (gloo_built()) return false;
  test::skip("this build has no Gloo (libgloo-dev)");
  return true;
}

// `c` as node k of 2 meeting at `rendezvous`, with no restart.
TrainConfig as_node(TrainConfig c, unsigned k, const std::string& rendezvous) {
  c.nodes = 2;
  c.node_rank = k;
  c.rendezvous = rendezvous;
  c.max_restarts = 0;
  return c;
}

}  // namespace

TEST_CASE("ddp: the same seed and workers give the same weights bit for bit") {
  auto [sparse, sparse_test] = test::generated_problem(6000, 1000, 500, 10, 0.0, 3);
  const Dataset dense = blobs(1500, 2);
  for (const std::string model : {"logistic", "softmax", "mlp"}) {
    INFO(model);
    const Dataset& d = model == "logistic" ? sparse : dense;
    for (unsigned workers : {2u, 3u}) {
      const auto c = ddp(model, workers, 4, 0.1f, 2);
      const auto a = train(c, d, nullptr), b = train(c, d, nullptr);
      CHECK(same_bits(a, b));
      CHECK(a.samples == 2 * (d.rows() / workers) * workers);  // drop_last: equal shares
    }
  }
}

TEST_CASE("ddp: W workers with batch B take serial's steps with batch W B") {
  // Worker k's j-th row is the serial order's (jW + k)-th, so the workers' b-th
  // mini-batches together are serial's b-th: the same update, summed in another order.
  auto [sparse, sparse_test] = test::generated_problem(4096, 1000, 400, 10, 0.0, 4);
  const Dataset dense = blobs(2048, 6);
  for (const std::string model : {"logistic", "softmax", "mlp"}) {
    INFO(model);
    const Dataset& d = model == "logistic" ? sparse : dense;
    auto serial = ddp(model, 1, 16, 0.2f, 2);
    serial.mode = Mode::serial;
    const auto s = train(serial, d, nullptr);
    const auto two = train(ddp(model, 2, 8, 0.2f, 2), d, nullptr);
    const auto four = train(ddp(model, 4, 4, 0.2f, 2), d, nullptr);
    MESSAGE(model << ": farthest from serial batch 16: 2x8 " << farthest(s, two) << ", 4x4 "
                  << farthest(s, four));
    CHECK(farthest(s, two) < 1e-5);
    CHECK(farthest(s, four) < 1e-5);
    CHECK(farthest(s, two) > 0);  // not trivially so: the steps moved the weights ...
    const auto other = train(ddp(model, 2, 4, 0.2f, 2), d, nullptr);
    CHECK(farthest(s, other) > 1e-3);  // ... and another global batch lands elsewhere
  }
}

TEST_CASE("dp: T threads split serial's mini-batch of B and take its step" * doctest::test_suite("threads")) {
  if (test::skip_threads_under_tsan()) return;
  auto [sparse, sparse_test] = test::generated_problem(4096, 1000, 400, 10, 0.0, 4);
  const Dataset dense = blobs(2048, 6);
  for (const std::string model : {"logistic", "softmax", "mlp"}) {
    INFO(model);
    const Dataset& d = model == "logistic" ? sparse : dense;
    auto c = ddp(model, 1, 16, 0.2f, 2);
    c.mode = Mode::serial;
    const auto s = train(c, d, nullptr);
    c.mode = Mode::dp;
    for (unsigned threads : {2u, 3u}) {
      c.workers = threads;
      const auto a = train(c, d, nullptr), b = train(c, d, nullptr);
      MESSAGE(model << ": dp x" << threads << " farthest from serial " << farthest(s, a));
      CHECK(same_bits(a, b));
      CHECK(farthest(s, a) < 1e-5);
      CHECK(a.samples == 2 * d.rows());
    }
  }
  // A model object that the configuration does not name cannot be made per thread.
  test::Ridge<> ridge;
  auto c = ddp("logistic", 2, 4, 0.1f, 1);
  c.mode = Mode::dp;
  CHECK_THROWS_AS(train(c, ridge, test::linear_data(100), nullptr), ConfigError);
}

TEST_CASE("ddp: --accumulate K sums K mini-batches' gradients before one step") {
  // As PyTorch's no_sync: the K gradients add up, so 2 workers x batch 4 x 2 steps
  // accumulated are serial's batch 16 at twice the step size.
  auto [d, unused] = test::generated_problem(4096, 100, 300, 8, 0.0, 8);
  auto serial = ddp("logistic", 1, 16, 0.4f, 2);
  serial.mode = Mode::serial;
  auto acc = ddp("logistic", 2, 4, 0.2f, 2);
  acc.accumulate = 2;
  const auto s = train(serial, d, nullptr), a = train(acc, d, nullptr);
  MESSAGE("accumulate 2: farthest from serial batch 16 at 2 lr: " << farthest(s, a));
  CHECK(farthest(s, a) < 1e-5);
}

TEST_CASE("ddp converges within 0.5 points of serial on a generated problem, SGD and AdaGrad" *
          doctest::test_suite("statistics")) {
  if (test::skip_statistics_under_sanitizers()) return;
  // Labels from a hidden logistic model: about 0.86 is the best a linear model gets.
  auto [train_set, test_set] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  for (Optimizer o : {Optimizer::sgd, Optimizer::adagrad}) {
    INFO(to_string(o));
    // The global batch is W times serial's: the step size grows with it (the linear
    // scaling rule, Goyal et al. 2017), so an example moves the weights as far.
    const float lr = o == Optimizer::sgd ? 0.5f : 0.2f;
    auto c = ddp("logistic", 1, 4, lr, 10);
    c.step_size.decay = 0.8f;
    c.optimizer = o;
    c.mode = Mode::serial;
    const auto serial = train(c, train_set, &test_set);
    CHECK(serial.test.accuracy > 0.83);
    c.mode = Mode::ddp;
    for (unsigned w : {2u, 4u}) {
      c.workers = w;
      c.step_size.lr0 = o == Optimizer::sgd ? lr * static_cast<float>(w) : lr;
      const auto r = train(c, train_set, &test_set);
      MESSAGE(to_string(o) << " serial " << serial.test.accuracy << ", ddp x" << w << " "
                           << r.test.accuracy);
      CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.005);
    }
    if (test::kThreadSanitizer) continue;  // dp's TBB threads: see skip_threads_under_tsan
    c.mode = Mode::dp;  // threads split serial's own mini-batches
    c.workers = 2;
    c.step_size.lr0 = lr;
    const auto r = train(c, train_set, &test_set);
    MESSAGE(to_string(o) << " dp x2 " << r.test.accuracy);
    CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.005);
  }
}

TEST_CASE("ddp and dp match serial on SpamAssassin (real data)" * doctest::test_suite("shared_data")) {
  auto data = test::shared_data();
  if (!data) return;
  const Dataset train_set = read_libsvm((*data / "spamassassin" / "spam.train.svm.gz").string());
  const Dataset test_set = read_libsvm((*data / "spamassassin" / "spam.test.svm.gz").string());
  auto c = ddp("logistic", 1, 1, 1.0f, 15);
  c.mode = Mode::serial;
  const auto serial = train(c, train_set, &test_set);
  c.mode = Mode::ddp;
  c.workers = 2;
  const auto r = train(c, train_set, &test_set);
  c.mode = Mode::dp;
  const auto p = train(c, train_set, &test_set);
  MESSAGE("spam: serial " << serial.test.accuracy << ", ddp x2 " << r.test.accuracy << ", dp x2 "
                          << p.test.accuracy);
  CHECK(std::abs(r.test.accuracy - serial.test.accuracy) <= 0.005);
  CHECK(std::abs(p.test.accuracy - serial.test.accuracy) <= 0.005);
}

namespace {
// Aborts the worker that meets row `row` first, once per test.
struct CrashAt {
  std::uint32_t row;
  void operator()(std::uint32_t r, const ParamSet&) const {
    if (r == row && test::shared_flag().exchange(1) == 0) std::abort();
  }
};
}  // namespace

TEST_CASE("ddp: a dead worker stops every worker at once; with restarts the group starts again") {
  const Dataset d = test::linear_data(8000);
  TrainConfig c;
  c.mode = Mode::ddp;
  c.workers = 3;
  c.epochs = 3;
  c.batch = 4;
  c.step_size.lr0 = 0.05f;
  c.comm_timeout = 30;  // the stop flag, not the timeout, must end the others' wait
  SUBCASE("no restart left: the run fails naming the worker, within a second or two") {
    test::shared_flag().store(0);
    test::Ridge<CrashAt> model(CrashAt{5000});
    c.max_restarts = 0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      train(c, model, d, &d);
      FAIL("the run went on without a worker");
    } catch (const WorkerError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("worker ") != std::string::npos);
      CHECK(m.find("ddp") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    CHECK(test::our_shm_entries().empty());
  }
  SUBCASE("a restart left: every worker starts again where all had been, and the run ends") {
    test::shared_flag().store(0);
    test::Ridge<CrashAt> model(CrashAt{5000});
    c.max_restarts = 1;
    const auto r = train(c, model, d, &d);
    CHECK(test::shared_flag().load() == 1);  // it did crash
    CHECK(r.restarts == 1);
    CHECK(r.history.size() >= 3);
    CHECK(r.test.loss < 0.01);  // y = 2 x0 - x1 learnt
    CHECK(r.samples >= 3 * (d.rows() / 3) * 3);
  }
}

TEST_CASE("ddp over Gloo's TCP pairs gives the shared-memory run's weights bit for bit" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  auto [sparse, sparse_test] = test::generated_problem(3000, 500, 300, 10, 0.0, 3);
  const Dataset dense = blobs(900, 2);
  auto leftovers = [] {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
      n += e.path().filename().string().rfind("hogwild-gloo-", 0) == 0;
    return n;
  };
  const std::size_t before = leftovers();
  for (const std::string model : {"logistic", "softmax", "mlp"}) {
    INFO(model);
    const Dataset& d = model == "logistic" ? sparse : dense;
    auto c = ddp(model, 3, 4, 0.1f, 2);
    const auto shm = train(c, d, nullptr);
    c.comm = "gloo";
    const auto gloo = train(c, d, nullptr);
    CHECK(same_bits(shm, gloo));
  }
  CHECK(leftovers() == before);  // the rendezvous directories went with their runs
}

namespace {

// What a node (a child process running train()) reports back.
struct NodeReport {
  int code = -1;  // 0, or the exit code of the error train() threw
  double seconds = 0;
  float weights[512];
  std::size_t count = 0;
  double accuracy = 0;
  double train_loss = 0;  // the last epoch's, over the node's own share
  std::uint64_t syncs = 0, samples = 0;
  unsigned restarts = 0;
  double sync_lag = 0;
  char message[512];
};

// Runs `nodes` process trees, node k calling train(configure(k)) (or `trainer`
// with it), while `meanwhile` runs in the test; returns their reports (in a
// shared page).

std::vector<NodeReport> run_nodes(unsigned nodes, const std::function<TrainConfig(unsigned)>& configure,
                                  const Dataset& d, const std::function<void(std::vector<pid_t>&)>& meanwhile = {},
                                  const Dataset* test = nullptr,
                                  const std::function<TrainResult(const TrainConfig&)>& trainer = {}) {
  comm_test::Shared page(nodes * sizeof(NodeReport));
  auto* reports = new (page.p) NodeReport[nodes];
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (unsigned k = 0; k < nodes; ++k) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      NodeReport& r = reports[k];
      const auto t0 = std::chrono::steady_clock::now();
      try {
        const auto result = trainer ? trainer(configure(k)) : train(configure(k), d, test);
        const auto& w = result.parameters.begin()->second;
        r.count = std::min<std::size_t>(w.size(), 512);
        std::copy(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(r.count), r.weights);
        r.accuracy = result.test.accuracy;
        r.train_loss = result.train_loss;
        r.syncs = result.node_syncs;
        r.sync_lag = result.node_sync_lag_examples;
        r.samples = result.samples;
        r.restarts = result.restarts;
        r.code = 0;
      } catch (const Error& e) {
        r.code = e.exit_code();
        std::snprintf(r.message, sizeof r.message, "%s", e.what());
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fflush(nullptr);
      _exit(0);
    }
    pids.push_back(pid);
  }
  if (meanwhile) meanwhile(pids);
  for (pid_t pid : pids) CHECK(test::wait_exit(pid, 120) != -1000);
  return {reports, reports + nodes};
}

}  // namespace

TEST_CASE("ddp on two nodes: two process trees train as one job through a FileStore" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  auto [d, unused] = test::generated_problem(4000, 100, 300, 10, 0.0, 5);
  test::TempDir store;
  auto config = [&](unsigned k) {
    return as_node(ddp("logistic", 2, 4, 0.2f, 2), k, "file:" + store.path().string());
  };
  const auto reports = run_nodes(2, config, d);
  REQUIRE(reports[0].code == 0);
  REQUIRE(reports[1].code == 0);
  // Every node applies the same sums: the same weights on both, bit for bit ...
  CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
  // ... and those of one node with all four workers, up to the order of the sums.
  const auto one = train(ddp("logistic", 4, 4, 0.2f, 2), d, nullptr);
  const auto& w = one.parameters.begin()->second;
  double worst = 0;
  for (std::size_t i = 0; i < reports[0].count; ++i)
    worst = std::max(worst, std::fabs(double(w[i]) - reports[0].weights[i]) / (1 + std::fabs(double(w[i]))));
  MESSAGE("2 nodes x 2 workers against 1 node x 4: farthest " << worst);
  CHECK(worst < 1e-5);
  // Each node's training loss is the mean over its own half: near the one node's
  // mean over all of it (each node divided its half's sum by every row: about half).
  MESSAGE("train loss: nodes " << reports[0].train_loss << ", " << reports[1].train_loss
                               << "; one node " << one.train_loss);
  for (const auto& r : reports)
    CHECK(r.train_loss == doctest::Approx(one.train_loss).epsilon(0.1));
  // The run erased its keys.
  CHECK(test::entries_in(store.path()) == 0);
  // A run killed whole (both process trees) leaves its keys; the next run through
  // the same store is not confused by them, and leaves them be.
  run_nodes(2, [&](unsigned k) {
    auto c = config(k);
    c.epochs = 1000;
    return c;
  }, d, [](std::vector<pid_t>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    for (pid_t pid : pids) kill(pid, SIGKILL);  // their workers die with them (PR_SET_PDEATHSIG)
  });
  const std::size_t stale = test::entries_in(store.path());
  CHECK(stale > 0);
  const auto again = run_nodes(2, config, d);
  CHECK(again[0].code == 0);
  CHECK(std::memcmp(again[0].weights, reports[0].weights, reports[0].count * sizeof(float)) == 0);
  CHECK(test::entries_in(store.path()) == stale);
}

TEST_CASE("ddp on two nodes through a redis-server the test starts" * doctest::test_suite("redis")) {
  if (skip_without_gloo()) return;
  if (!std::filesystem::exists(test::kRedisServer)) {
    test::skip(std::string(test::kRedisServer) + " is not installed (scripts/install-deps.sh)");
    return;
  }
  test::TempDir dir;
  test::RedisServer redis(dir);
  auto [d, unused] = test::generated_problem(4000, 100, 300, 10, 0.0, 6);
  auto config = [&](unsigned k) { return as_node(ddp("softmax", 2, 4, 0.2f, 2), k, redis.url()); };
  for (int run = 0; run < 2; ++run) {  // the second through the first's keys
    const auto reports = run_nodes(2, config, d);
    INFO(reports[0].message << " / " << reports[1].message);
    REQUIRE(reports[0].code == 0);
    REQUIRE(reports[1].code == 0);
    CHECK(reports[0].count > 0);
    CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
    CHECK(redis.keys() == 0);  // the run erased its keys
  }
}

TEST_CASE("ddp on two nodes: other options on one node, or a dead node, stop both with an error" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  auto [d, unused] = test::generated_problem(20000, 100, 300, 10, 0.0, 5);
  test::TempDir store;
  auto config = [&](unsigned k) {
    auto c = as_node(ddp("logistic", 1, 1, 0.2f, 5), k, "file:" + store.path().string());
    c.comm_timeout = 3;
    return c;
  };
  SUBCASE("other options: exit 2 on both, before training") {
    const auto reports = run_nodes(2, [&](unsigned k) {
      auto c = config(k);
      if (k == 1) c.step_size.lr0 = 0.3f;
      return c;
    }, d);
    for (const auto& r : reports) {
      INFO(r.message);
      CHECK(r.code == kExitBadInput);
    }
    CHECK(test::entries_in(store.path()) == 0);
  }
  SUBCASE("another --bucket-mb (collectives of other sizes): exit 2 on both, naming it") {
    const auto reports = run_nodes(2, [&](unsigned k) {
      auto c = config(k);
      if (k == 1) c.bucket_bytes = 1 << 16;
      return c;
    }, d);
    for (const auto& r : reports) {
      INFO(r.message);
      CHECK(r.code == kExitBadInput);
    }
    const std::string said = std::string(reports[0].message) + reports[1].message;
    CHECK(said.find("--bucket-mb=") != std::string::npos);
    CHECK(test::entries_in(store.path()) == 0);
  }
  SUBCASE("two nodes given the same --node-rank: both stop, one saying so") {
    const auto reports = run_nodes(2, [&](unsigned) { return config(0); }, d);
    bool said = false;
    INFO(reports[0].message << " / " << reports[1].message);
    for (const auto& r : reports) {
      CHECK(r.code != 0);
      said |= std::string(r.message).find("two nodes were given the same --node-rank") !=
              std::string::npos;
    }
    CHECK(said);
    CHECK(test::entries_in(store.path()) == 0);
  }
  SUBCASE("node 1 SIGKILLed mid-run: node 0 fails within the timeout, naming it") {
    const auto reports = run_nodes(2, config, d, [](std::vector<pid_t>& pids) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      kill(pids[1], SIGKILL);  // its workers die with it (PR_SET_PDEATHSIG)
    });
    INFO(reports[0].message);
    CHECK(reports[0].code == kExitWorkerFailed);
    CHECK(reports[0].seconds < 1.5 + 3 + 5);
    CHECK(std::string(reports[0].message).find("worker") != std::string::npos);
    CHECK(test::entries_in(store.path()) == 0);  // node 0 erased the dead node's keys too
  }
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("ddp on two nodes: a worker that dies restarts both nodes' groups, and the job completes" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  const Dataset d = test::linear_data(8000);
  test::TempDir store;
  test::shared_flag().store(0);
  test::Ridge<CrashAt> model(CrashAt{5000});  // one worker of one node, once
  const auto reports = run_nodes(2, [&](unsigned k) {
    TrainConfig c = as_node(TrainConfig{}, k, "file:" + store.path().string());
    c.mode = Mode::ddp;
    c.workers = 2;
    c.epochs = 3;
    c.batch = 4;
    c.step_size.lr0 = 0.05f;
    c.comm_timeout = 10;
    c.max_restarts = 1;
    return c;
  }, d, {}, &d, [&](const TrainConfig& c) { return train(c, model, d, &d); });
  CHECK(test::shared_flag().load() == 1);  // it did crash
  for (const auto& r : reports) {
    INFO(r.message);
    REQUIRE(r.code == 0);
    CHECK(r.restarts == 1);
    // A restart costs at most the group's stop (--comm-timeout + 5 s) and the new
    // group's meeting (--comm-timeout): 4.6 s in all alone, 36 s once with the whole
    // suite beside it on 2 cores.
    CHECK(r.seconds < 10 + 5 + 10 + 20);
  }
  CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
  CHECK(test::entries_in(store.path()) == 0);  // both groups' keys
}

TEST_CASE("hogwild across two nodes: each trains its half, syncing every N examples, near serial" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  auto [d, t] = test::generated_problem(40000, 10000, 2000, 20, 0.0, 3);
  test::TempDir store;
  TrainConfig c;
  c.mode = Mode::serial;
  c.epochs = 8;
  c.step_size.lr0 = 0.5f;
  c.step_size.decay = 0.8f;
  c.seed = 42;
  const auto serial = train(c, d, &t);
  const auto reports = run_nodes(2, [&](unsigned k) {
    TrainConfig n = as_node(c, k, "file:" + store.path().string());
    n.mode = Mode::hogwild;
    n.workers = 2;
    n.sync_every = 500;
    n.step_size.lr0 = 2 * c.step_size.lr0;  // the nodes' changes are averaged: each counts half
    return n;
  }, d, {}, &t);
  for (const auto& r : reports) {
    INFO(r.message);
    REQUIRE(r.code == 0);
    MESSAGE("serial " << serial.test.accuracy << ", a node of 2 x 2 hogwild: " << r.accuracy
                      << " after " << r.syncs << " syncs");
    CHECK(std::abs(r.accuracy - serial.test.accuracy) <= 0.01);
    CHECK(r.samples == 8 * (d.rows() / 2));  // its half of the rows, every epoch
  }
  // The leaders sync as often: each epoch's share / N, and once more at its end,
  // when every worker of the node is done: then both nodes hold the same floats.
  CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
  CHECK(reports[0].syncs == reports[1].syncs);
  CHECK(reports[0].syncs == 8 * (d.rows() / 4 / 500 + 1));
  // What a sync brings in: the other node's 2 workers' examples since the last, 2 x
  // 500 at the 20 syncs in an epoch, 2 x 0 at its end (the leader's 10,000 rows).
  for (const auto& r : reports) {
    MESSAGE("examples of the other node merged per sync: " << r.sync_lag);
    CHECK(r.sync_lag == doctest::Approx(2.0 * 10000 / 21).epsilon(0.05));
  }
}

TEST_CASE("a rendezvous directory this user cannot write: exit 2 saying so, nothing left behind" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  auto [d, unused] = test::generated_problem(400, 10, 50, 5, 0.0, 2);
  test::TempDir dir;
  const auto store = dir.path() / "store";
  std::filesystem::create_directory(store);
  std::filesystem::permissions(dir.path(), std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  std::filesystem::permissions(store, std::filesystem::perms::owner_read |
                                          std::filesystem::perms::owner_exec |
                                          std::filesystem::perms::group_read |
                                          std::filesystem::perms::group_exec |
                                          std::filesystem::perms::others_read |
                                          std::filesystem::perms::others_exec);
  // Root writes anywhere: the node then runs as nobody (65534).
  const auto reports = run_nodes(1, [&](unsigned) {
    if (geteuid() == 0 && (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0))
      throw Error("cannot become nobody", 77);
    return as_node(ddp("logistic", 2, 4, 0.2f, 1), 0, "file:" + store.string());
  }, d);
  if (reports[0].code == 77) {
    test::skip("cannot run as another user than root here");
    return;
  }
  INFO(reports[0].message);
  CHECK(reports[0].code == kExitBadInput);
  CHECK(std::string(reports[0].message).find("is not writable: Permission denied") != std::string::npos);
  CHECK(test::entries_in(dir.path()) == 1);  // the store directory alone
  CHECK(test::entries_in(store) == 0);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("hogwild across two nodes: uneven shares, or syncs every T seconds, keep the leaders in step" * doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  // 4003 rows over 2 x 2 workers: node 0's leader trains 1000 a epoch, node 1's 1001.
  auto [d, t] = test::generated_problem(4003, 1000, 300, 10, 0.0, 4);
  test::TempDir store;
  auto config = [&](unsigned k) {
    TrainConfig n;
    n.mode = Mode::hogwild;
    n.workers = 2;
    n.epochs = 4;
    n.step_size.lr0 = 0.5f;
    n.seed = 9;
    n.comm_timeout = 5;
    return as_node(n, k, "file:" + store.path().string());
  };
  SUBCASE("every 1001 examples: only node 1's leader gets that far, so no node syncs mid-epoch") {
    const auto reports = run_nodes(2, [&](unsigned k) {
      auto c = config(k);
      c.sync_every = 1001;
      return c;
    }, d, {}, &t);
    for (const auto& r : reports) {
      INFO(r.message);
      REQUIRE(r.code == 0);
      CHECK(r.syncs == 4);  // at each epoch's end
    }
    CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
  }
  SUBCASE("every 20 ms: the leaders agree on an interval in examples, and sync as often") {
    const auto reports = run_nodes(2, [&](unsigned k) {
      auto c = config(k);
      c.sync_seconds = 0.02;
      c.model = "softmax";  // slower than logistic: a few syncs a epoch
      return c;
    }, d, {}, &t);
    for (const auto& r : reports) {
      INFO(r.message);
      REQUIRE(r.code == 0);
      MESSAGE("syncs every 20 ms: " << r.syncs << " in 4 epochs, accuracy " << r.accuracy);
      CHECK(r.syncs > 4);
      CHECK(r.accuracy > 0.5);
    }
    CHECK(reports[0].syncs == reports[1].syncs);
    CHECK(std::memcmp(reports[0].weights, reports[1].weights, reports[0].count * sizeof(float)) == 0);
  }
  CHECK(test::entries_in(store.path()) == 0);
}

TEST_CASE("ddp: a run resumed from its checkpoint ends with the uninterrupted run's weights") {
  auto [d, unused] = test::generated_problem(4000, 100, 300, 10, 0.0, 7);
  test::TempDir dir;
  for (Optimizer o : {Optimizer::sgd, Optimizer::adagrad}) {
    INFO(to_string(o));
    auto c = ddp("logistic", 2, 4, 0.2f, 4);
    c.optimizer = o;
    const auto whole = train(c, d, nullptr);
    c.epochs = 2;
    c.checkpoint = dir.file("ddp.ckpt");
    train(c, d, nullptr);
    c.epochs = 4;
    c.resume = c.checkpoint;
    const auto resumed = train(c, d, nullptr);
    CHECK(resumed.resumed_epochs == 2);
    CHECK(same_bits(whole, resumed));  // AdaGrad's accumulators came back too
  }
}

TEST_CASE("ddp: options that do not apply are refused") {
  TrainConfig c;
  c.mode = Mode::hogwild;
  c.accumulate = 2;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.mode = Mode::ddp;
  CHECK_NOTHROW(c.validate());
  c.accumulate = 0;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.accumulate = 1;
  c.hot_k = 10;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.hot_k = 0;
  c.merge_every = 100;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.merge_every = 0;
  c.comm_timeout = 0;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.comm_timeout = 10;
  c.comm = "mpi";
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.comm = "shm";
  c.mode = Mode::hogwild;
  c.comm = "gloo";
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.comm = "shm";
  c.mode = Mode::ddp;
  c.nodes = 2;
  CHECK_THROWS_AS(c.validate(), ConfigError);  // no rendezvous
  c.rendezvous = "file:/tmp";
  c.node_rank = 2;
  CHECK_THROWS_AS(c.validate(), ConfigError);  // out of range
  c.node_rank = 1;
  CHECK_NOTHROW(c.validate());
  c.mode = Mode::hogwild;
  CHECK_THROWS_AS(c.validate(), ConfigError);
}
