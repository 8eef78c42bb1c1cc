// --mode ps, the parameter server (modes/ps/ps.hpp): exact sums of integer-valued
// updates from 4 replica processes through 2 server processes, on one machine and on
// two nodes (servers meeting through Gloo); the staleness bound never exceeded (from
// the replicas' clocks); convergence beside serial; two process trees as two nodes on
// loopback; a dead server ending the run with its name, a dead replica respawned with
// its lost examples counted; bad options.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "comm/gloo.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"
#include "support.hpp"
#include "modes/ps/ps.hpp"

using namespace hogwild;
using namespace hogwild::detail;
using test::SharedBytes;

namespace {

// A number that follows `label` in `text` (NaN when absent).
double number_after(const std::string& text, const std::string& label) {
  const auto at = text.rfind(label);
  if (at == std::string::npos) return std::nan("");
  return std::stod(text.substr(at + label.size()));
}

// True (after test::skip) when this build has no Gloo.
bool skip_without_gloo() {
  if (gloo_built()) return false;
  test::skip("this build has no Gloo (libgloo-dev)");
  return true;
}

TrainConfig ps_config(unsigned workers, unsigned servers) {
  TrainConfig c = test::sgd_config(Mode::ps, workers);
  c.servers = servers;
  return c;
}

}  // namespace

TEST_CASE("4 replicas' integer-valued updates through 2 servers add up exactly") {
  for (const bool hashed : {false, true}) {
    CAPTURE(hashed);
    constexpr unsigned kReplicas = 4, kServers = 2, kPushes = 50;
    // w: a quarter of it non-zero in each push (pairs); b: all of it (buckets), its
    // slices over a ring's largest record (two buckets each). Slices of unequal size.
    constexpr std::size_t kW = 10001, kB = 40001;
    SharedBytes weights((kW + kB) * sizeof(float));
    SharedBytes region(PsRegion::bytes(kReplicas, kServers));
    PsRegion::prepare(region.bytes, kReplicas, kServers, 1, hashed);
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
          for (std::size_t k = r; k < kW; k += kReplicas)
            mine[0].grad[k] += static_cast<float>(r + 1);
          for (std::size_t k = 0; k < kB; ++k) mine[1].grad[k] += 1;
          if (!client.after_batch(none, 0.1f)) return 30;
        }
        client.finish(0.1f);
        return 0;
      }));
    for (pid_t p : procs) CHECK(test::wait_exit(p, 120) == 0);
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < kW; ++k)
      wrong += w[k] != static_cast<float>(k % 5 + kPushes * (k % kReplicas + 1));
    for (std::size_t k = 0; k < kB; ++k)
      wrong += w[kW + k] != static_cast<float>((kW + k) % 5 + kPushes * kReplicas);
    CHECK(wrong == 0);
    const PsRegion ps(region.bytes);
    std::uint64_t records = 0;
    for (unsigned s = 0; s < kServers; ++s) records += ps.server(s).records.load();
    CHECK(records >= kReplicas * kPushes * kServers);  // every push reached every server
    for (unsigned r = 0; r < kReplicas; ++r) {
      CHECK(ps.replica(r).clock.load() == kPushes);
      CHECK(ps.replica(r).done.load() == 1);
    }
    // Each server applied its keys: contiguous, its slices; hashed, about half of
    // every tensor (50 pushes of a quarter of w from each replica, and all of b).
    const double all = kPushes * (kW + kReplicas * kB);
    for (unsigned s = 0; s < kServers; ++s) {
      const double share = static_cast<double>(ps.server(s).keys.load()) / all;
      CHECK(share == doctest::Approx(0.5).epsilon(0.02));
    }
    CHECK(ps.server(0).keys.load() + ps.server(1).keys.load() == kPushes * (kW + kReplicas * kB));
  }
}

namespace {

// Replicas each push `pushes` times a gradient of ones (SGD: +1; AdaGrad: a step
// of lr / sqrt(G)) on every `stride`-th coordinate of a 20011-float tensor (stride
// 1: buckets, two records a push; 3: pairs), through one server killed `kills`
// times, each time inside a record (stopped until it is in one), and replaced by a
// new server process; returns the final weights and how many records replacements
// finished.
std::pair<std::vector<float>, std::uint64_t> push_through_killed_server(
    unsigned replicas, unsigned pushes, Optimizer optimizer, unsigned kills, std::size_t stride) {
  constexpr std::size_t kW = 20011;
  SharedBytes weights(2 * kW * sizeof(float));  // w, then AdaGrad's G
  SharedBytes region(PsRegion::bytes(replicas, 1));
  PsRegion::prepare(region.bytes, replicas, 1);
  auto* w = reinterpret_cast<float*>(weights.bytes.data());
  for (std::size_t k = 0; k < kW; ++k) w[k] = static_cast<float>(k % 7);
  ParamSet::Tensor t{"w", w, kW};
  t.state = w + kW;
  const ParamSet shared({t});
  auto start_server = [&] {
    return test::fork_child([&] {
      serve(shared, PsRegion(region.bytes), 0, optimizer, nullptr);
      return 0;
    });
  };
  std::vector<pid_t> clients;
  for (unsigned r = 0; r < replicas; ++r)
    clients.push_back(test::fork_child([&, r] {
      PsOptions o;
      o.optimizer = optimizer;
      PsClient client(shared, PsRegion(region.bytes), r, o, nullptr);
      const Batch none{nullptr, nullptr, nullptr, 0};
      for (unsigned p = 0; p < pushes; ++p) {
        const ParamSet& mine = client.params();
        for (std::size_t k = 0; k < kW; k += stride) mine[0].grad[k] += 1;
        if (!client.after_batch(none, 0.5f)) return 30;
      }
      client.finish(0.5f);
      return 0;
    }));
  const PsServerSlot& slot = PsRegion(region.bytes).server(0);
  pid_t server = start_server();
  std::uint64_t seed = 12345;
  bool finished = false;
  for (unsigned k = 0; k < kills && !finished; ++k) {
    // Stop it at random moments until one finds it inside a record.
    for (unsigned tries = 0;; ++tries) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      usleep(static_cast<useconds_t>(20 + (seed >> 33) % 300));
      kill(server, SIGSTOP);
      int status = 0;
      REQUIRE(waitpid(server, &status, WUNTRACED) == server);
      if (!WIFSTOPPED(status)) {  // it had finished: the job is done
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        finished = true;
        break;
      }
      if (slot.ring.load() != PsServerSlot::kNone || tries > 200)
        break;
      kill(server, SIGCONT);
    }
    if (finished) break;
    kill(server, SIGKILL);
    CHECK(test::wait_exit(server, 30) == -SIGKILL);
    server = start_server();
  }
  for (pid_t c : clients) CHECK(test::wait_exit(c, 120) == 0);
  if (!finished) CHECK(test::wait_exit(server, 120) == 0);
  return {std::vector<float>(w, w + kW), slot.recovered.load()};
}

}  // namespace

TEST_CASE("a server killed again and again is replaced, and applies every pushed update once") {
  for (const std::size_t stride : {1, 3}) {
    CAPTURE(stride);
    // SGD, 2 replicas: integer sums, exact whatever the order.
    constexpr unsigned kPushes = 1000;
    const auto [sums, finished] =
        push_through_killed_server(2, kPushes, Optimizer::sgd, 25, stride);
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < sums.size(); ++k)
      wrong += sums[k] != static_cast<float>(k % 7) + (k % stride == 0 ? 2.f * kPushes : 0.f);
    CHECK(wrong == 0);
    MESSAGE("records finished by a replacement: " << finished);
    CHECK(finished > 0);  // kills landed inside records
    // AdaGrad, 1 replica (one order): the same bits as with no kill, G's undo included.
    const auto calm = push_through_killed_server(1, 600, Optimizer::adagrad, 0, stride).first;
    const auto [killed, again] = push_through_killed_server(1, 600, Optimizer::adagrad, 15, stride);
    CHECK(std::memcmp(calm.data(), killed.data(), calm.size() * sizeof(float)) == 0);
    CHECK(again > 0);
  }
}

TEST_CASE("2 nodes x 2 replicas through 2 servers a node: every node ends with the exact sums" *
          doctest::test_suite("gloo")) {
  if (skip_without_gloo()) return;
  for (const bool hashed : {false, true}) {
    CAPTURE(hashed);
    constexpr unsigned kNodes = 2, kReplicas = 2, kServers = 2, kPushes = 40;
    constexpr unsigned kAll = kNodes * kReplicas;
    constexpr std::size_t kW = 5003, kB = 1001;  // parts of unequal size; b is pushed as buckets
    test::TempDir store;
    struct Node {
      SharedBytes weights{(kW + kB) * sizeof(float)};
      SharedBytes region{PsRegion::bytes(kReplicas, kServers)};
    };
    Node nodes[kNodes];
    for (auto& n : nodes) {
      PsRegion::prepare(n.region.bytes, kReplicas, kServers, kNodes, hashed);
      auto* w = reinterpret_cast<float*>(n.weights.bytes.data());
      for (std::size_t k = 0; k < kW + kB; ++k) w[k] = static_cast<float>(k % 5);
    }
    auto shared = [&](Node& n) {
      auto* w = reinterpret_cast<float*>(n.weights.bytes.data());
      return ParamSet({{"w", w, kW}, {"b", w + kW, kB}});
    };
    // The largest gap each replica saw, right after a push, between its clock and the
    // slowest of all four still training, read from both nodes' regions (this test's
    // processes see every node's memory; the servers' rounds carry it between nodes).
    SharedBytes gaps(kAll * sizeof(std::uint64_t));
    auto* gap = reinterpret_cast<std::uint64_t*>(gaps.bytes.data());
    auto slowest = [&] {
      std::uint64_t least = ~std::uint64_t{0};
      for (auto& n : nodes) {
        const PsRegion ps(n.region.bytes);
        for (unsigned r = 0; r < kReplicas; ++r)
          if (!ps.replica(r).done.load()) least = std::min(least, ps.replica(r).clock.load());
      }
      return least;
    };
    std::vector<pid_t> procs;
    for (unsigned n = 0; n < kNodes; ++n)
      for (unsigned s = 0; s < kServers; ++s)
        procs.push_back(test::fork_child([&, n, s] {
          GlooOptions o;
          o.rendezvous = "file:" + store.path().string();
          o.run_id = hashed ? "exact-hashed" : "exact";
          o.tag = "slice-" + std::to_string(s);
          o.timeout = std::chrono::seconds(60);
          auto across = make_gloo_communicator(o, n, kNodes);
          serve(shared(nodes[n]), PsRegion(nodes[n].region.bytes), s, Optimizer::sgd, nullptr,
                across.get());
          return 0;
        }));
    for (unsigned n = 0; n < kNodes; ++n)
      for (unsigned r = 0; r < kReplicas; ++r)
        procs.push_back(test::fork_child([&, n, r] {
          PsOptions bounded;
          bounded.staleness = 1;  // across nodes too
          PsClient client(shared(nodes[n]), PsRegion(nodes[n].region.bytes), r, bounded, nullptr);
          const Batch none{nullptr, nullptr, nullptr, 0};
          const unsigned g = n * kReplicas + r;  // replica g of all four
          for (unsigned p = 0; p < kPushes; ++p) {
            // Replica g adds g + 1 to every coordinate k with k % 4 == g, and 1 to b.
            const ParamSet& mine = client.params();
            for (std::size_t k = g; k < kW; k += kAll) mine[0].grad[k] += static_cast<float>(g + 1);
            for (std::size_t k = 0; k < kB; ++k) mine[1].grad[k] += 1;
            // A slow replica: the bound holds the others back. 5 ms a push, so that node
            // 1's replicas get ahead of it even on a loaded machine (2 ms was not always
            // enough: a CI run with a build beside it saw them never ahead).
            if (g == 0) usleep(5000);
            if (!client.after_batch(none, 0.1f)) return 30;
            const std::uint64_t least = slowest();
            if (least <= p + 1) gap[g] = std::max(gap[g], p + 1 - least);
          }
          client.finish(0.1f);
          return 0;
        }));
    for (pid_t p : procs) CHECK(test::wait_exit(p, 120) == 0);
    // A push starts at most 1 ahead of the slowest: just after it, at most 2.
    for (unsigned g = 0; g < kAll; ++g) CHECK(gap[g] <= 2);
    CHECK(std::max(gap[2], gap[3]) >= 1);  // node 1's replicas came up to the bound
    for (unsigned n = 0; n < kNodes; ++n) {
      const auto* w = reinterpret_cast<const float*>(nodes[n].weights.bytes.data());
      std::size_t wrong = 0;
      for (std::size_t k = 0; k < kW; ++k)
        wrong += w[k] != static_cast<float>(k % 5) + static_cast<float>(kPushes * (k % kAll + 1));
      for (std::size_t k = 0; k < kB; ++k)
        wrong += w[kW + k] != static_cast<float>((kW + k) % 5) + static_cast<float>(kPushes * kAll);
      INFO("node " << n);
      CHECK(wrong == 0);
      const PsRegion ps(nodes[n].region.bytes);
      for (unsigned r = 0; r < kReplicas; ++r) {
        CHECK(ps.replica(r).clock.load() == kPushes);
        CHECK(ps.replica(r).push_gap_max.load() <= 1);  // the bound, over both nodes' clocks
      }
      CHECK(ps.server(0).rounds.load() > 0);
      CHECK(ps.server(0).sent_bytes.load() > 0);
    }
  }
}

TEST_CASE("ps converges beside serial, and the staleness bound is never exceeded") {
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  const double serial = train(test::sgd_config(Mode::serial, 1), train_set, &test_set).test.accuracy;
  // Push and fetch every example, and no replica more than 4 pushes ahead (without
  // a bound, on 2 cores one replica can run thousands of pushes ahead, and the
  // accuracy then drifts by about half a point from run to run).
  TrainConfig small = ps_config(2, 2);
  small.staleness = 4;
  const TrainResult ps = train(small, train_set, &test_set);
  MESSAGE("serial " << serial << ", ps 2x2 " << ps.test.accuracy << ", mean staleness at fetch "
                    << ps.ps.mean_staleness);
  CHECK(ps.test.accuracy >= serial - 0.005);
  CHECK(ps.samples == 8 * train_set.rows());
  CHECK(ps.ps.pushes == 8 * train_set.rows());  // push_every 1, batch 1
  CHECK(ps.ps.bytes > 0);
  REQUIRE(ps.ps.server_records.size() == 2);
  CHECK(ps.ps.server_records[1] > 0);
  // Each pushed coordinate was applied by one server, once: a push (one example)
  // holds its row's features and the bias, less any whose gradient was exactly 0.
  REQUIRE(ps.ps.server_keys.size() == 2);
  const double keys = static_cast<double>(ps.ps.server_keys[0] + ps.ps.server_keys[1]);
  const double pushed = 8.0 * static_cast<double>(train_set.nnz() + train_set.rows());
  MESSAGE("coordinates applied by each server: " << ps.ps.server_keys[0] << ", "
          << ps.ps.server_keys[1] << " (of " << pushed << " pushed)");
  CHECK(keys <= pushed);
  CHECK(keys >= 0.95 * pushed);
  CHECK(ps.ps.server_keys[1] > 0);
  // Hashed key ranges spread the popular low feature ids: the same run, the load
  // nearer even, the same accuracy.
  small.hashed_keys = true;
  const TrainResult hashed = train(small, train_set, &test_set);
  auto imbalance = [](const std::vector<std::uint64_t>& k) {
    return std::abs(static_cast<double>(k[0]) - static_cast<double>(k[1])) /
           static_cast<double>(k[0] + k[1]);
  };
  REQUIRE(hashed.ps.server_keys.size() == 2);
  MESSAGE("hashed: coordinates " << hashed.ps.server_keys[0] << ", " << hashed.ps.server_keys[1]
                                 << ", accuracy " << hashed.test.accuracy);
  CHECK(imbalance(hashed.ps.server_keys) < imbalance(ps.ps.server_keys) / 2);
  CHECK(hashed.test.accuracy >= serial - 0.005);
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
  ada.staleness = 4;
  ada.optimizer = Optimizer::adagrad;
  ada.step_size.lr0 = 0.1f;
  const TrainResult a = train(ada, train_set, &test_set);
  MESSAGE("adagrad: serial " << ada_reference << ", ps " << a.test.accuracy);
  CHECK(a.test.accuracy > ada_reference - 0.01);
  CHECK(a.optimizer_state.at("w").size() == a.parameters.at("w").size());
}

TEST_CASE("every built-in model trains under ps beside serial") {
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  RatingsGenerateOptions g;
  g.users = 300;
  g.items = 200;
  g.rank = 5;
  g.ratings = 20000;
  g.test_ratings = 4000;
  g.seed = 5;
  const GeneratedRatings ratings = generate_ratings(g);
  // The sparse models list their keys; softmax and the MLP's deeper tensors are
  // scanned (buckets), the MLP's first layer listed on these sparse rows.
  for (const std::string model : {"logistic", "hinge", "squared", "softmax", "mlp", "mf"}) {
    CAPTURE(model);
    const bool mf = model == "mf";
    TrainConfig c = test::sgd_config(Mode::serial, 1);
    c.model = model;
    c.epochs = 5;
    if (model == "squared") c.step_size.lr0 = 0.05f;
    if (model == "mlp") {
      c.model_options.hidden = {16};
      c.step_size.lr0 = 0.1f;
    }
    if (mf) {
      c.model_options.rank = 5;
      c.model_options.l2 = 0.01f;
      c.step_size.lr0 = 0.02f;
      c.step_size.decay = 1;
      c.epochs = 8;
    }
    const Dataset& tr = mf ? ratings.train : train_set;
    const Dataset& te = mf ? ratings.test : test_set;
    const TrainResult serial = train(c, tr, &te);
    c.mode = Mode::ps;
    c.workers = 2;
    c.servers = 2;
    c.staleness = 4;
    const TrainResult ps = train(c, tr, &te);
    MESSAGE(model << ": serial " << (mf ? serial.test.rmse : serial.test.accuracy) << ", ps 2x2 "
                  << (mf ? ps.test.rmse : ps.test.accuracy) << ", " << ps.ps.bytes
                  << " bytes pushed");
    CHECK(ps.ps.pushes == c.epochs * tr.rows());
    CHECK(ps.ps.bytes > 0);
    if (mf) {
      CHECK(ps.test.rmse <= serial.test.rmse * 1.05 + 0.01);
    } else {
      CHECK(ps.test.accuracy >= serial.test.accuracy - 0.02);
    }
  }
}

TEST_CASE("ps within half a point of serial on SpamAssassin (real data)" *
          doctest::test_suite("shared_data")) {
  auto data = test::shared_data();
  if (!data) return;
  const Dataset train_set = read_libsvm((*data / "spamassassin" / "spam.train.svm.gz").string());
  const Dataset test_set = read_libsvm((*data / "spamassassin" / "spam.test.svm.gz").string());
  TrainConfig c = test::sgd_config(Mode::serial, 1);
  c.model = "logistic";
  c.epochs = 10;
  const TrainResult serial = train(c, train_set, &test_set);
  c.mode = Mode::ps;  // small push and fetch intervals: every example
  c.workers = 2;
  c.servers = 2;
  c.staleness = 4;
  const TrainResult ps = train(c, train_set, &test_set);
  MESSAGE("spam: serial " << serial.test.accuracy << ", ps 2x2 " << ps.test.accuracy);
  CHECK(ps.test.accuracy >= serial.test.accuracy - 0.005);
}

TEST_CASE("ps: the checkpoint holds every shard, AdaGrad's accumulators and each replica's "
          "place; a resumed run goes on from it") {
  auto [train_set, test_set] = test::generated_problem(3000, 1000, 300, 20, 0.05, 11);
  test::TempDir dir;
  TrainConfig c = ps_config(2, 2);
  c.optimizer = Optimizer::adagrad;
  c.step_size.lr0 = 0.1f;
  c.staleness = 4;
  c.epochs = 5;
  const TrainResult straight = train(c, train_set, &test_set);
  c.epochs = 2;
  c.checkpoint = dir.file("ps.ck");
  const TrainResult first = train(c, train_set, &test_set);
  const Checkpoint saved = read_checkpoint(c.checkpoint);
  CHECK(saved.epochs_done() == 2);
  REQUIRE(saved.workers.size() == 2);
  std::uint64_t samples = 0;
  for (const WorkerState& w : saved.workers) samples += w.samples;
  CHECK(samples == 2 * train_set.rows());
  // The servers' shards, both of them, as the run ended: weights and accumulators.
  std::map<std::string, std::vector<float>> tensors;
  for (const NamedTensor& t : saved.tensors) tensors[t.name] = t.values;
  CHECK(tensors.at("param:w") == first.parameters.at("w"));
  CHECK(tensors.at("state:w") == first.optimizer_state.at("w"));
  const auto& G = tensors.at("state:w");
  const std::size_t half = G.size() / 2;  // server 1's slice starts here (ceil)
  CHECK(std::count_if(G.begin(), G.begin() + half, [](float g) { return g > 0; }) > 0);
  CHECK(std::count_if(G.begin() + half, G.end(), [](float g) { return g > 0; }) > 0);
  c.epochs = 5;
  c.resume = c.checkpoint;
  const TrainResult resumed = train(c, train_set, &test_set);
  CHECK(resumed.resumed_epochs == 2);
  CHECK(resumed.history.size() == 3);
  CHECK(resumed.samples == straight.samples);
  // It went on from the saved accumulators: its first epoch's loss is near the
  // straight run's third, not its first.
  MESSAGE("train loss: straight epochs 1 and 3 " << straight.history[0].train_loss << ", "
          << straight.history[2].train_loss << "; resumed epoch 3 "
          << resumed.history.front().train_loss << "; accuracy straight "
          << straight.test.accuracy << ", resumed " << resumed.test.accuracy);
  CHECK(std::abs(resumed.history.front().train_loss - straight.history[2].train_loss) <
        std::abs(resumed.history.front().train_loss - straight.history[0].train_loss));
  CHECK(resumed.test.accuracy >= straight.test.accuracy - 0.01);
  CHECK(read_checkpoint(c.checkpoint).epochs_done() == 5);
}

TEST_CASE("a parameter server that dies is replaced on its shard; with no restart left the run "
          "ends naming it" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 60000, 500);
  const std::vector<std::string> common{"--train", train_file, "--test", test_file, "--seed", "3",
                                        "--lr", "0.2"};
  // Starts a ps run with `extra`, and kills its server (spawned last) once the
  // first epoch is reported: with most of the run still to come on any machine (a
  // fixed delay outlived the whole run on a fast one).
  auto kill_server = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    for (const char* a : {"--mode", "ps", "--workers", "2", "--servers", "1"}) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    auto bg = test::start_train(args, dir);
    const auto procs = test::wait_for_workers(bg.pid, 3);
    REQUIRE(procs.size() == 3);
    const pid_t server = *std::max_element(procs.begin(), procs.end());
    REQUIRE(test::wait_for_text(bg.out_path, "epoch   1/", 120));
    kill(server, SIGKILL);
    return std::pair{bg, server};
  };
  {
    const auto [bg, server] = kill_server({"--epochs", "8"});
    CHECK(test::wait_exit(bg.pid, 300) == 0);
    const std::string out = test::read_text(bg.out_path);
    INFO(out);
    CHECK(out.find("parameter server 0 (pid " + std::to_string(server) +
                   ") was killed by signal 9 (Killed); restarting it on its shard") !=
          std::string::npos);
    CHECK(out.find("1 worker restart(s)") != std::string::npos);
    auto serial_args = common;
    serial_args.insert(serial_args.begin(), test::hogwild_train_path());
    for (const char* a : {"--mode", "serial", "--epochs", "8"}) serial_args.push_back(a);
    const auto serial = test::run(serial_args);
    REQUIRE(serial.exit_code == 0);
    const double reference = number_after(serial.out, "test accuracy ");
    const double accuracy = number_after(out, "test accuracy ");
    MESSAGE("serial " << reference << ", ps with its server replaced " << accuracy);
    CHECK(accuracy > reference - 0.01);
  }
  {
    const auto [bg, server] = kill_server({"--epochs", "200", "--max-restarts", "0"});
    CHECK(test::wait_exit(bg.pid, 60) == 3);
    const std::string out = test::read_text(bg.out_path);
    CHECK(out.find("parameter server 0 (pid " + std::to_string(server) +
                   ") was killed by signal 9") != std::string::npos);
    CHECK(out.find("--max-restarts 0, so the run stopped") != std::string::npos);
  }
  CHECK(test::our_shm_entries().empty());
}

namespace {

// hogwild_train as node k of 2 meeting in `store`.
test::Background start_node(unsigned k, const std::vector<std::string>& args,
                            const test::TempDir& dir, const test::TempDir& store) {
  std::vector<std::string> a = args;
  for (const std::string& s : {std::string("--nodes"), std::string("2"), std::string("--node-rank"),
                               std::to_string(k), std::string("--rendezvous"),
                               "file:" + store.path().string()})
    a.push_back(s);
  return test::start_train(a, dir, "node" + std::to_string(k) + ".txt");
}

}  // namespace

TEST_CASE("a launcher's environment gives --nodes and --node-rank: Slurm's, or torchrun's; flags win" *
          doctest::test_suite("nodes")) {
  if (test::skip_cli_under_tsan()) return;
  if (skip_without_gloo()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 4000, 300);
  for (const auto& [size, rank] : {std::pair{"SLURM_NNODES", "SLURM_NODEID"},
                                   std::pair{"WORLD_SIZE", "RANK"}}) {
    const std::string size_variable = size;  // (clang 14 captures no structured binding)
    CAPTURE(size_variable);
    test::TempDir store;
    std::vector<test::Background> nodes;
    for (unsigned k = 0; k < 2; ++k)
      nodes.push_back(test::start_program(
          {"/usr/bin/env", fmt::format("{}=2", size), fmt::format("{}={}", rank, k),
           test::hogwild_train_path(), "--train", train_file, "--epochs", "2", "--mode", "ddp",
           "--batch", "8", "--rendezvous", "file:" + store.path().string(), "--summary",
           dir.file(fmt::format("s{}.json", k))},
          dir, fmt::format("node{}.txt", k), false));
    for (unsigned k = 0; k < 2; ++k) {
      CHECK(test::wait_exit(nodes[k].pid, 200) == 0);
      INFO(test::read_text(nodes[k].out_path));
      const auto j = nlohmann::json::parse(test::read_text(dir.file(fmt::format("s{}.json", k))));
      CHECK(j["nodes"] == 2);
      CHECK(j["nodes_from"] == size);
      CHECK(j["node_rank_from"] == rank);
    }
  }
  // A flag wins over the environment; without --rendezvous the environment is not read
  // (a one-machine run inside a Slurm allocation stays one).
  const auto r = test::run({"/usr/bin/env", "SLURM_NNODES=2", "SLURM_NODEID=1",
                            test::hogwild_train_path(), "--train", train_file, "--epochs", "1",
                            "--summary", dir.file("one.json")});
  CHECK(r.exit_code == 0);
  const auto j = nlohmann::json::parse(test::read_text(dir.file("one.json")));
  CHECK(j["nodes_from"] == "default");
  CHECK(j["nodes"] == 1);
}

TEST_CASE("ps on two nodes: two process trees train as one job on loopback" *
          doctest::test_suite("nodes")) {
  if (test::skip_cli_under_tsan()) return;
  if (skip_without_gloo()) return;
  test::TempDir dir, store;
  const auto [train_file, test_file] = test::problem_files(dir, 8000, 500);
  const std::vector<std::string> common{"--train", train_file, "--test", test_file,
                                        "--epochs", "3", "--lr", "0.2", "--seed", "3"};
  auto serial_args = common;
  serial_args.insert(serial_args.begin(), test::hogwild_train_path());
  for (const char* a : {"--mode", "serial"}) serial_args.push_back(a);
  const auto serial = test::run(serial_args);
  REQUIRE(serial.exit_code == 0);
  auto args = common;
  for (const char* a : {"--mode", "ps", "--workers", "2", "--servers", "2", "--staleness", "4"})
    args.push_back(a);
  auto node0 = start_node(0, args, dir, store), node1 = start_node(1, args, dir, store);
  CHECK(test::wait_exit(node0.pid, 200) == 0);
  CHECK(test::wait_exit(node1.pid, 200) == 0);
  const std::string out0 = test::read_text(node0.out_path), out1 = test::read_text(node1.out_path);
  INFO(out0 << "\n----\n" << out1);
  const double reference = number_after(serial.out, "test accuracy ");
  const double a0 = number_after(out0, "test accuracy "), a1 = number_after(out1, "test accuracy ");
  MESSAGE("serial " << reference << ", ps on 2 nodes x 2 replicas x 2 servers: " << a0);
  // Every node ends with every server's final values: the same weights.
  CHECK(a0 == a1);
  CHECK(number_after(out0, "test loss ") == number_after(out1, "test loss "));
  // 4 replicas over two nodes, asynchronous: the accuracy moves from run to run
  // (0.7655 to 0.787 in 7 runs against serial's 0.7715, with the build before
  // buckets and hashed keys as with this one), so the margin is that spread.
  // (Within 0.5 points of serial: the one-machine tests.)
  CHECK(a0 > reference - 0.015);
  // Each node trained half of the rows, three times.
  CHECK(number_after(out0, "done: ") == 3 * 4000);
  for (const auto* out : {&out0, &out1}) {
    CHECK(number_after(*out, "staleness at push mean ") <= 4);
    const auto max_at = out->find(" max ", out->rfind("staleness at push mean "));
    CHECK(std::stod(out->substr(max_at + 5)) <= 4);  // the bound, over both nodes
    CHECK(number_after(*out, "records a server, ") > 0);  // server rounds
  }
  CHECK(test::entries_in(store.path()) == 0);  // the run erased its keys
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("ps on two nodes trains every built-in model as it does on one machine" *
          doctest::test_suite("nodes")) {
  if (test::skip_cli_under_tsan()) return;
  if (skip_without_gloo()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 4000, 300);
  const auto made = test::run({test::hogwild_data_path(), "generate", "--kind", "ratings", "--users",
                               "300", "--items", "200", "--rank", "5", "--ratings", "8000",
                               "--seed", "5", "--out", dir.file("r.train"), "--test-out",
                               dir.file("r.test")});
  REQUIRE(made.exit_code == 0);
  for (const std::string model : {"logistic", "hinge", "squared", "softmax", "mlp", "mf"}) {
    CAPTURE(model);
    const bool mf = model == "mf";
    std::vector<std::string> args{"--train", mf ? dir.file("r.train") : train_file, "--test",
                                  mf ? dir.file("r.test") : test_file, "--model", model,
                                  "--epochs", mf ? "6" : "3", "--batch", "8", "--seed", "3",
                                  "--mode", "ps", "--staleness", "4", "--lr"};
    args.push_back(model == "squared" ? "0.05" : mf ? "1" : "0.5");
    if (model == "mlp") args.insert(args.end(), {"--hidden", "16"});
    if (mf) args.insert(args.end(), {"--rank", "5", "--l2", "0.01"});
    // One machine: 2 replicas, 2 servers; two nodes: one of each a node.
    auto one = args;
    one.insert(one.begin(), test::hogwild_train_path());
    one.insert(one.end(), {"--workers", "2", "--servers", "2"});
    const auto reference = test::run(one);
    REQUIRE(reference.exit_code == 0);
    test::TempDir store;
    args.insert(args.end(), {"--workers", "1", "--servers", "1"});
    auto node0 = start_node(0, args, dir, store), node1 = start_node(1, args, dir, store);
    CHECK(test::wait_exit(node0.pid, 200) == 0);
    CHECK(test::wait_exit(node1.pid, 200) == 0);
    const std::string out0 = test::read_text(node0.out_path), out1 = test::read_text(node1.out_path);
    INFO(out0 << "\n----\n" << out1);
    const std::string measure = mf ? "test rmse " : "test accuracy ";
    const double r = number_after(reference.out, measure), a0 = number_after(out0, measure);
    MESSAGE(model << ": " << measure << "on one machine " << r << ", on two nodes " << a0);
    CHECK(a0 == number_after(out1, measure));  // every node ends with the same weights
    CHECK(number_after(out0, "test loss ") == number_after(out1, "test loss "));
    // Asynchronous runs differ from seed to seed and run to run: the MLP's accuracy
    // here spans 0.76 to 0.79 on one machine and on two nodes alike (seeds 3 to 5),
    // MF's RMSE 0.319 to 0.345.
    if (mf) {
      CHECK(a0 <= r * 1.2);
      CHECK(a0 < 0.5);  // it trained: the ratings' spread is about 1
    } else {
      CHECK(a0 >= r - 0.04);
      CHECK(a0 > 0.65);
    }
    CHECK(test::entries_in(store.path()) == 0);
  }
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("ps on two nodes: a dead replica is respawned on its node, a dead server stops both" *
          doctest::test_suite("nodes")) {
  if (test::skip_cli_under_tsan()) return;
  if (skip_without_gloo()) return;
  test::TempDir dir;
  const auto [train_file, test_file] = test::problem_files(dir, 20000, 500);
  const std::vector<std::string> args{"--train", train_file, "--test", test_file, "--mode", "ps",
                                      "--workers", "2", "--servers", "1", "--push-every", "8",
                                      "--fetch-every", "8", "--epochs", "4", "--max-restarts", "2"};
  // (4 epochs: about 7 s on 2 cores, far past the kill 0.3 s in.)
  // Starts both nodes, and kills node 1's replica 0 (spawned first) or its server
  // (spawned last) a moment into training; returns the nodes and the pid killed.
  struct Killed {
    test::Background node0, node1;
    pid_t pid;
  };
  auto kill_on_node1 = [&](const test::TempDir& store, bool server) {
    Killed k{start_node(0, args, dir, store), start_node(1, args, dir, store), 0};
    const auto procs = test::wait_for_workers(k.node1.pid, 3);
    REQUIRE(procs.size() == 3);
    k.pid = server ? *std::max_element(procs.begin(), procs.end())
                   : *std::min_element(procs.begin(), procs.end());
    usleep(300000);
    kill(k.pid, SIGKILL);
    return k;
  };
  {  // a replica of node 1
    test::TempDir store;
    const auto [node0, node1, replica] = kill_on_node1(store, false);
    CHECK(test::wait_exit(node0.pid, 300) == 0);
    CHECK(test::wait_exit(node1.pid, 300) == 0);
    const std::string out1 = test::read_text(node1.out_path);
    INFO(out1);
    CHECK(out1.find("(pid " + std::to_string(replica) + ") was killed by signal 9") !=
          std::string::npos);
    CHECK(out1.find("(the updates of its ") != std::string::npos);
    CHECK(out1.find("since its last push are lost); restarting it") != std::string::npos);
    CHECK(out1.find("1 worker restart(s)") != std::string::npos);
  }
  {  // the server of node 1
    test::TempDir store;
    const auto [node0, node1, server] = kill_on_node1(store, true);
    CHECK(test::wait_exit(node1.pid, 60) == 3);
    CHECK(test::wait_exit(node0.pid, 60) == 3);
    const std::string out0 = test::read_text(node0.out_path), out1 = test::read_text(node1.out_path);
    INFO(out0 << "\n----\n" << out1);
    CHECK(out1.find("parameter server 0 (pid " + std::to_string(server) +
                    ") was killed by signal 9") != std::string::npos);
    CHECK(out0.find("parameter server 0 (pid ") != std::string::npos);
    CHECK(out0.find("node 1") != std::string::npos);  // whom node 0's server lost
  }
  {  // both nodes killed whole leave their keys; the next run through the store
     // skips their run id
    test::TempDir store;
    auto node0 = start_node(0, args, dir, store), node1 = start_node(1, args, dir, store);
    REQUIRE(test::wait_for_workers(node1.pid, 3).size() == 3);
    usleep(300000);
    kill(node0.pid, SIGKILL);  // their workers and servers die with them (PR_SET_PDEATHSIG)
    kill(node1.pid, SIGKILL);
    CHECK(test::wait_exit(node0.pid, 30) == -SIGKILL);
    CHECK(test::wait_exit(node1.pid, 30) == -SIGKILL);
    CHECK(test::entries_in(store.path()) > 0);
    auto again0 = start_node(0, args, dir, store), again1 = start_node(1, args, dir, store);
    CHECK(test::wait_exit(again0.pid, 300) == 0);
    CHECK(test::wait_exit(again1.pid, 300) == 0);
  }
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("ps options are checked" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  test::write_text(dir.file("t.svm"), "1 1:1\n0 2:1\n1 3:1\n0 4:1\n");
  const auto run = [&](const std::vector<std::string>& extra) {
    return test::run_train({"--train", dir.file("t.svm")}, extra);
  };
  auto r = run({"--mode", "ps", "--servers", "0"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--servers 0 is out of range (1 to 64)") != std::string::npos);
  r = run({"--mode", "ps", "--staleness", "-2"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--staleness -2 is out of range (-1 to ") != std::string::npos);
  r = run({"--mode", "hogwild", "--push-every", "4"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--push-every applies to --mode ps, not hogwild") != std::string::npos);
  r = run({"--mode", "ps", "--servers", "8"});  // w has 4 coordinates
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--servers 8 makes 8 shards, but the model's largest tensor has 4 coordinates") !=
        std::string::npos);
  r = run({"--mode", "ps", "--key-ranges", "striped"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--key-ranges") != std::string::npos);
  CHECK(r.out.find("striped") != std::string::npos);
  r = run({"--mode", "lock", "--key-ranges", "hashed"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--key-ranges applies to --mode ps, not lock") != std::string::npos);
  r = run({"--mode", "ps", "--workers", "2", "--servers", "2", "--epochs", "2"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ps: ") != std::string::npos);
  r = run({"--mode", "ps", "--workers", "2", "--servers", "2", "--epochs", "2", "--key-ranges",
           "hashed", "--summary", dir.file("s.json")});
  CHECK(r.exit_code == 0);
  CHECK(test::read_text(dir.file("s.json")).find("\"key_ranges\": \"hashed\"") != std::string::npos);
}
