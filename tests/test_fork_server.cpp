// Workers started by the fork server from a description (rank, configuration, arena
// handle, rows' handles): they train exactly as forked workers do, a crashed one is
// restarted through the server even after the parent started a thread pool, and the
// server follows the program out.
#include <doctest/doctest.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "hogwild/error.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"
#include "trainer/worker_start.hpp"

using namespace hogwild;

namespace {

// First thing, before doctest's main and before any thread: as a program's main would.
const bool g_server_started = [] {
  start_fork_server();
  return true;
}();

std::set<int> children_of(int parent) {
  const auto c = test::children_of(parent);
  return {c.begin(), c.end()};
}

int threads_of_this_process() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return 0;
}

TrainConfig served(unsigned workers, unsigned epochs) {
  TrainConfig c;
  c.model = "logistic";
  c.mode = Mode::hogwild;
  c.workers = workers;
  c.epochs = epochs;
  c.step_size.lr0 = 0.1f;
  c.worker_start = WorkerStart::fork_server;
  return c;
}

}  // namespace

TEST_CASE("a worker restarted through the fork server after the parent started a thread pool trains on") {
  REQUIRE(g_server_started);
  const int server = fork_server_pid();
  REQUIRE(server > 0);
  CHECK(children_of(server).empty());  // the server is idle between runs

  // The parent is no longer forkable safely: a TBB pool (two threads at work) and a
  // thread of its own run through the whole training.
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, 2);
  std::atomic<double> sum{0};
  tbb::parallel_for(0, 1 << 16, [&](int i) { sum.fetch_add(i * 1e-9, std::memory_order_relaxed); });
  std::jthread busy([](std::stop_token stop) {
    while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  REQUIRE(threads_of_this_process() >= 2);

  // Long enough (30 epochs of 0.02-0.1 s here) that both workers are alive at the
  // report of epoch 2.
  auto [tr, te] = test::generated_problem(200000, 4000, 500, 10, 0.02, 3);
  TrainConfig c = served(2, 30);
  // Step sizes that decay (0.1 x 0.9^epoch): at a constant 0.1 the last iterate's
  // accuracy alone spread over 0.828-0.845 across 12 serial seeds, wider than the
  // check below; decayed, serial and hogwild both ended at 0.842-0.845.
  c.step_size.decay = 0.9f;
  c.max_restarts = 2;
  TrainConfig reference = c;
  reference.mode = Mode::serial;
  const auto serial = train(reference, tr, &te);
  std::set<int> first, later;
  auto r = train(c, tr, &te, [&](const Progress& p) {
    const auto kids = children_of(server);
    if (p.epoch == 2 && p.end_of_epoch && first.empty()) {
      first = kids;  // the run's workers are the server's children, not ours
      if (!kids.empty()) kill(*kids.begin(), SIGKILL);
    } else if (!first.empty()) {
      later.insert(kids.begin(), kids.end());  // the restart's own report sees the new one
    }
  });
  CHECK(first.size() == 2);
  CHECK(children_of(getpid()).count(server) == 1);  // the only child of the test process
  CHECK(r.restarts == 1);
  // 30 epochs' evaluations, and the restart's own report.
  CHECK(std::count_if(r.history.begin(), r.history.end(),
                      [](const Progress& p) { return p.end_of_epoch; }) == 30);
  CHECK(r.history.back().epoch == 30);
  MESSAGE("accuracy ", r.test.accuracy, " serial ", serial.test.accuracy);
  CHECK(r.test.accuracy > serial.test.accuracy - 0.01);
  // The replacement was started by the server too.
  std::set<int> replacements;
  for (int pid : later)
    if (!first.count(pid)) replacements.insert(pid);
  CHECK(replacements.size() == 1);
  CHECK(children_of(server).empty());
  busy.request_stop();
}

TEST_CASE("workers started by the fork server train exactly as forked ones") {
  const auto [sparse_tr, sparse_te] = test::generated_problem(6000, 1000, 300, 8, 0.02, 5);
  const Dataset dense_tr = sparse_tr.densified(300), dense_te = sparse_te.densified(300);
  for (const char* model : {"logistic", "softmax", "mlp"}) {
    CAPTURE(model);
    const bool mlp = std::string(model) == "mlp";  // dense rows only
    const Dataset& tr = mlp ? dense_tr : sparse_tr;
    const Dataset& te = mlp ? dense_te : sparse_te;
    TrainConfig c = served(1, 3);
    c.model = model;
    c.model_options.hidden = {16};
    c.batch = 8;
    const auto through_server = train(c, tr, &te);
    c.worker_start = WorkerStart::fork;
    const auto forked = train(c, tr, &te);
    CHECK(through_server.parameters == forked.parameters);  // one worker: bit for bit
    CHECK(through_server.test.loss == forked.test.loss);
  }
}

TEST_CASE("the fork server refuses a model object the configuration does not name") {
  auto [tr, te] = test::generated_problem(2000, 200, 100, 5, 0.02, 5);
  LinearModel hinge(LinearLoss::hinge, ModelOptions{});
  TrainConfig c = served(2, 1);  // names "logistic"
  CHECK_THROWS_WITH_AS(train(c, hinge, tr, &te), doctest::Contains("makes each worker's model by name"),
                       ConfigError);
}

TEST_CASE("options by name: set and read as the command line's text, ranges from their declarations") {
  TrainConfig c;
  set_option(c, "lr", "0.5");
  set_option(c, "merge-every", "auto");
  set_option(c, "no-bias", "true");
  set_option(c, "sync-every", "250ms");
  CHECK(c.step_size.lr0 == 0.5f);
  CHECK(c.merge_every == TrainConfig::kMergeAuto);
  CHECK(!c.model_options.bias);
  CHECK(c.sync_seconds == doctest::Approx(0.25));
  CHECK(option_value(c, "lr") == "0.5");
  CHECK(option_value(c, "merge-every") == "auto");
  CHECK_THROWS_WITH_AS(set_option(c, "frobnicate", "1"), "there is no option --frobnicate",
                       ConfigError);
  CHECK_THROWS_WITH_AS(set_option(c, "workers", "0"), "--workers 0 is out of range (1 to 1024)",
                       ConfigError);
  CHECK_THROWS_WITH_AS(set_option(c, "lr", "fast"), "--lr: expected a number, got fast",
                       ConfigError);
  // A field set directly is checked against the same declaration.
  TrainConfig d;
  d.epochs = 0;
  CHECK_THROWS_WITH_AS(d.validate(), "--epochs 0 is out of range (1 to 1000000)", ConfigError);
  d.epochs = 1;
  d.servers = 4;  // ps's, under hogwild
  CHECK_THROWS_WITH_AS(d.validate(), "--servers applies to --mode ps, not hogwild", ConfigError);
  // Each option once, each with its concern's name.
  std::set<std::string> names;
  for (const auto& o : train_options()) {
    CHECK_MESSAGE(names.insert(o.name).second, o.name);
    CHECK(std::string(to_string(o.concern)) != "?");
  }
}

TEST_CASE("a configuration travels to a worker whole") {
  TrainConfig c;
  c.model = std::string("mlp");
  c.model_options.l2 = 0.25f;
  c.model_options.bias = false;
  c.model_options.hidden = {7, 3};
  c.model_options.rank = 5;
  c.model_options.matmul = MatmulPrecision::bf16;
  c.model_options.factors = Dtype::f16;
  c.mode = Mode::atomic;
  c.optimizer = Optimizer::adagrad;
  c.workers = 6;
  c.partition = Partition::contiguous;
  c.epochs = 9;
  c.step_size = {0.123456789f, 0.9f, 17.5};
  c.batch = 33;
  c.merge_every = TrainConfig::kMergeAuto;
  c.hot_k = 11;
  c.hot_flush = 12;
  c.layout = WeightLayout::replicas;
  c.accumulate = 3;
  c.bucket_bytes = 1 << 22;
  c.comm_timeout = 2.5;
  c.comm = "gloo";
  c.nodes = 3;
  c.node_rank = 2;
  c.rendezvous = "redis://h:1";
  c.iface = "eth9";
  c.run_id = "r42";
  c.sync_seconds = 0.25;  // (sync_every: one or the other)
  c.telemetry = true;
  c.telemetry_every = 17;
  c.conflicts = true;
  c.conflict_k = 5;
  c.digest_weights = true;
  c.simulate_access = "lock";
  c.cost_model = "costs.json";
  c.grad_delay_ns = 1234;
  c.straggler_worker = 1;
  c.straggler_factor = 2.5;
  c.balance = Balance::fixed;
  c.seed = 0xfedcba9876543210ULL;
  c.eval_every = 1.5;
  c.shm_dir = std::string("/tmp/x y");
  c.pin = true;
  c.huge_pages = true;
  c.max_restarts = 4;
  c.checkpoint = std::string("ck\xff\xfe");  // a path that is not UTF-8 (JSON text would throw)
  c.checkpoint_every = 2.5;
  c.resume = std::string("r");
  c.save_model = std::string("m.safetensors");
  c.init_from = std::string("w.safetensors");
  c.handle_signals = true;
  c.worker_start = WorkerStart::fork_server;
  c.join_timeout = 7.5;
  c.stall_timeout = 9.25;
  c.servers = 3;
  c.push_every = 4;
  c.fetch_every = 5;
  c.staleness = 2;
  c.hashed_keys = true;
  c.device = Device::cuda;
  c.cuda_ipc = CudaIpc::legacy;
  c.device_streams = 3;
  c.device_warps = 96;
  c.result_parameters = false;
  c.mode_options["stripes"] = 8;
  const TrainConfig d = detail::config_from_cbor(detail::config_to_cbor(c));
  CHECK(d.model == c.model);
  CHECK(d.model_options.l2 == c.model_options.l2);
  CHECK(d.model_options.bias == c.model_options.bias);
  CHECK(d.model_options.hidden == c.model_options.hidden);
  CHECK(d.model_options.rank == c.model_options.rank);
  CHECK(d.model_options.matmul == c.model_options.matmul);
  CHECK(d.model_options.factors == c.model_options.factors);
  CHECK(d.mode == c.mode);
  CHECK(d.optimizer == c.optimizer);
  CHECK(d.workers == c.workers);
  CHECK(d.partition == c.partition);
  CHECK(d.epochs == c.epochs);
  CHECK(d.step_size.lr0 == c.step_size.lr0);
  CHECK(d.step_size.decay == c.step_size.decay);
  CHECK(d.step_size.inverse_scale == c.step_size.inverse_scale);
  CHECK(d.batch == c.batch);
  CHECK(d.merge_every == c.merge_every);
  CHECK(d.hot_k == c.hot_k);
  CHECK(d.hot_flush == c.hot_flush);
  CHECK(d.layout == c.layout);
  CHECK(d.accumulate == c.accumulate);
  CHECK(d.bucket_bytes == c.bucket_bytes);
  CHECK(d.comm_timeout == c.comm_timeout);
  CHECK(d.comm == c.comm);
  CHECK(d.nodes == c.nodes);
  CHECK(d.node_rank == c.node_rank);
  CHECK(d.rendezvous == c.rendezvous);
  CHECK(d.iface == c.iface);
  CHECK(d.run_id == c.run_id);
  CHECK(d.sync_every == c.sync_every);
  CHECK(d.sync_seconds == c.sync_seconds);
  CHECK(d.telemetry == c.telemetry);
  CHECK(d.telemetry_every == c.telemetry_every);
  CHECK(d.conflicts == c.conflicts);
  CHECK(d.conflict_k == c.conflict_k);
  CHECK(d.digest_weights == c.digest_weights);
  CHECK(d.simulate_access == c.simulate_access);
  CHECK(d.cost_model == c.cost_model);
  CHECK(d.grad_delay_ns == c.grad_delay_ns);
  CHECK(d.straggler_worker == c.straggler_worker);
  CHECK(d.straggler_factor == c.straggler_factor);
  CHECK(d.seed == c.seed);
  CHECK(d.eval_every == c.eval_every);
  CHECK(d.shm_dir == c.shm_dir);
  CHECK(d.pin == c.pin);
  CHECK(d.huge_pages == c.huge_pages);
  CHECK(d.max_restarts == c.max_restarts);
  CHECK(d.checkpoint == c.checkpoint);
  CHECK(d.checkpoint_every == c.checkpoint_every);
  CHECK(d.resume == c.resume);
  CHECK(d.save_model == c.save_model);
  CHECK(d.init_from == c.init_from);
  CHECK(d.handle_signals == c.handle_signals);
  CHECK(d.worker_start == c.worker_start);
  CHECK(d.mode_options == c.mode_options);
  // Every declared option: this test gave it a value of its own, and it came back.
  const TrainConfig defaults;
  for (const auto& o : train_options()) {
    CAPTURE(o.name);
    CHECK(o.get(c) != o.get(defaults));
    CHECK(o.get(d) == o.get(c));
  }
}
