// --mode ps, the parameter server on one machine (trainer/ps.hpp): exact sums of
// integer-valued updates from 4 replica processes through 2 server processes, the
// staleness bound never exceeded (from the replicas' clocks), convergence beside
// serial, a dead server ending the run with its name, and bad options.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"
#include "trainer/ps.hpp"

using namespace hogwild;
using namespace hogwild::detail;
using test::SharedBytes;

namespace {

TrainConfig ps_config(unsigned workers, unsigned servers) {
  TrainConfig c = test::sgd_config(Mode::ps, workers);
  c.servers = servers;
  return c;
}

}  // namespace

TEST_CASE("4 replicas' integer-valued updates through 2 servers add up exactly") {
  constexpr unsigned kReplicas = 4, kServers = 2, kPushes = 50;
  constexpr std::size_t kW = 10001, kB = 3;  // slices of unequal size
  SharedBytes weights((kW + kB) * sizeof(float));
  SharedBytes region(PsRegion::bytes(kReplicas, kServers));
  PsRegion::prepare(region.bytes, kReplicas, kServers);
  auto* w = reinterpret_cast<float*>(weights.bytes.data());
  for (std::size_t k = 0; k < kW + kB; ++k) w[k] = static_cast<float>(k % 5);
  const ParamSet shared({{"w", w, kW}, {"b", w + kW, kB}});
  std::vector<pid_t> procs;
  for (unsigned s = 0; s < kServers; ++s)
    procs.push_back(test::fork_child([&] {
      serve(shared, PsRegion(region.bytes), s, Optimizer::sgd, nullptr);
      return 0;
    }));
  for (unsigned r = 0; r < kReplicas; ++r)
    procs.push_back(test::fork_child([&] {
      PsClient client(shared, PsRegion(region.bytes), r, PsOptions{}, nullptr);
      const Batch none{nullptr, nullptr, nullptr, 0};
      for (unsigned p = 0; p < kPushes; ++p) {
        // Replica r adds r + 1 to every coordinate k with k % 4 == r, and 1 to b.
        const ParamSet& mine = client.params();
        for (std::size_t k = r; k < kW; k += kReplicas) mine[0].grad[k] += static_cast<float>(r + 1);
        for (std::size_t k = 0; k < kB; ++k) mine[1].grad[k] += 1;
        if (!client.after_batch(none, 0.1f)) return 30;
      }
      client.finish(0.1f);
      return 0;
    }));
  for (pid_t p : procs) CHECK(test::wait_exit(p, 120) == 0);
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < kW; ++k)
    wrong += w[k] != static_cast<float>(k % 5) + static_cast<float>(kPushes * (k % kReplicas + 1));
  for (std::size_t k = 0; k < kB; ++k)
    wrong += w[kW + k] != static_cast<float>((kW + k) % 5) + static_cast<float>(kPushes * kReplicas);
  CHECK(wrong == 0);
  const PsRegion ps(region.bytes);
  std::uint64_t records = 0;
  for (unsigned s = 0; s < kServers; ++s) records += ps.server(s).records.load();
  CHECK(records >= kReplicas * kPushes * kServers);  // every push reached every server
  for (unsigned r = 0; r < kReplicas; ++r) {
    CHECK(ps.replica(r).clock.load() == kPushes);
    CHECK(ps.replica(r).done.load() == 1);
  }
}

TEST_CASE("ps converges beside serial, and the staleness bound is never exceeded") {
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  const double serial = train(test::sgd_config(Mode::serial, 1), train_set, &test_set).test.accuracy;
  const TrainResult ps = train(ps_config(2, 2), train_set, &test_set);
  MESSAGE("serial " << serial << ", ps 2x2 " << ps.test.accuracy << ", mean staleness at fetch "
                    << ps.ps.mean_staleness);
  CHECK(ps.test.accuracy > serial - 0.005);
  CHECK(ps.samples == 8 * train_set.rows());
  CHECK(ps.ps.pushes == 8 * train_set.rows());  // push_every 1, batch 1
  CHECK(ps.ps.bytes > 0);
  REQUIRE(ps.ps.server_records.size() == 2);
  CHECK(ps.ps.server_records[1] > 0);
  for (long bound : {0L, 2L}) {
    TrainConfig c = ps_config(4, 2);
    c.push_every = 4;
    c.fetch_every = 8;
    c.staleness = bound;
    const TrainResult r = train(c, train_set, &test_set);
    MESSAGE("staleness bound " << bound << ": at push mean " << r.ps.mean_push_staleness
                               << " max " << r.ps.max_push_staleness << ", accuracy "
                               << r.test.accuracy);
    CHECK(r.ps.max_push_staleness <= static_cast<std::uint64_t>(bound));
    CHECK(r.ps.max_staleness <= static_cast<std::uint64_t>(bound) + 1);  // the push just made
    // Larger intervals and 4 replicas: up to 16 examples' updates at stale weights.
    CHECK(r.test.accuracy > serial - 0.04);
  }
  // AdaGrad: each server keeps its shard's accumulators.
  TrainConfig ada_serial = test::sgd_config(Mode::serial, 1);
  ada_serial.optimizer = Optimizer::adagrad;
  ada_serial.step_size.lr0 = 0.1f;
  const double ada_reference = train(ada_serial, train_set, &test_set).test.accuracy;
  TrainConfig ada = ps_config(2, 2);
  ada.optimizer = Optimizer::adagrad;
  ada.step_size.lr0 = 0.1f;
  const TrainResult a = train(ada, train_set, &test_set);
  MESSAGE("adagrad: serial " << ada_reference << ", ps " << a.test.accuracy);
  CHECK(a.test.accuracy > ada_reference - 0.01);
  CHECK(a.optimizer_state.at("w").size() == a.parameters.at("w").size());
}

TEST_CASE("a parameter server that dies ends the run with an error naming it") {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 50000, 2000);
  auto bg = test::start_train({"--train", train_file, "--test", test_file, "--mode", "ps",
                               "--workers", "2", "--servers", "1", "--epochs", "200"},
                              dir);
  const auto procs = test::wait_for_workers(bg.pid, 3);
  REQUIRE(procs.size() == 3);
  const pid_t server = *std::max_element(procs.begin(), procs.end());  // spawned last
  usleep(200000);
  kill(server, SIGKILL);
  CHECK(test::wait_exit(bg.pid, 60) == 3);
  const std::string out = test::read_text(bg.out_path);
  CHECK(out.find("parameter server 0 (pid " + std::to_string(server) + ") was killed by signal 9") !=
        std::string::npos);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("ps options are checked") {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  test::write_text(dir.file("t.svm"), "1 1:1\n0 2:1\n1 3:1\n0 4:1\n");
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{test::hogwild_train_path(), "--train", dir.file("t.svm")};
    a.insert(a.end(), extra.begin(), extra.end());
    return test::run(a);
  };
  auto r = run({"--mode", "ps", "--servers", "0"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--servers must be from 1 to 64, got 0") != std::string::npos);
  r = run({"--mode", "ps", "--staleness", "-2"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--staleness must be >= 0") != std::string::npos);
  r = run({"--mode", "hogwild", "--push-every", "4"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("work with --mode ps, not hogwild") != std::string::npos);
  r = run({"--mode", "ps", "--workers", "2", "--servers", "2", "--epochs", "2"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ps: ") != std::string::npos);
}
