// The Gloo Communicator between real forked ranks on loopback: the suite every
// backend passes (comm_suite.hpp), then what is Gloo's own: sums in rank order to
// the bit (the bits shm gives), empty data everywhere, abort() from another thread, a stuck or missing
// rank, the rendezvous stores (the redis cases, test suite "redis", start their own
// redis-server), ranks on two hosts (suite "hostname": a UTS namespace), and bad
// settings.
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo.hpp"
#include "comm/nccl.hpp"
#include "comm/shm.hpp"
#include "comm_suite.hpp"
#include "hogwild/config.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using hogwild::ConfigError;
using hogwild::GlooOptions;
using hogwild::detail::ShmCommunicator;
using namespace std::chrono_literals;
using hogwild::test::free_port;
using hogwild::test::kRedisServer;
using hogwild::test::RedisServer;

#if HOGWILD_HAVE_GLOO

#include "comm/rendezvous_store.hpp"  // (gloo's headers: only where Gloo is built)

namespace {

// The suite's groups meet in a fresh rendezvous directory each.
std::unique_ptr<hogwild::test::TempDir> g_rendezvous;

comm_test::CommBackend gloo_backend() {
  return {
      "gloo",
      [](unsigned, unsigned) { g_rendezvous = std::make_unique<hogwild::test::TempDir>(); },
      [](unsigned rank, unsigned size, unsigned tag, comm_test::Millis timeout) {
        const GlooOptions o{"file:" + g_rendezvous->path().string(), "suite", "",
                            "node " + std::to_string(rank), timeout, std::to_string(tag), ""};
        return hogwild::make_gloo_communicator(o, rank, size);
      },
      [] { g_rendezvous.reset(); },
  };
}

}  // namespace

HOGWILD_COMM_SUITE("gloo", gloo_backend())

namespace {

constexpr unsigned kRanks = 3;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Outcome {
  int code = -1;        // exit status, 128 + signal when killed
  std::string message;  // the hogwild::Error that ended it, if one did
  double when = 0;      // now() when it did
};
struct Report {
  char message[1024];
  double when;
};

// comm_test::run_ranks, bringing back how each rank ended: the message and time of
// the hogwild::Error that ended it.
std::vector<Outcome> run_reporting(unsigned ranks, const std::function<int(unsigned)>& body) {
  comm_test::Shared shared(ranks * sizeof(Report));
  Report* reports = shared.as<Report>();
  std::fflush(nullptr);  // else each rank writes what the test process has buffered again
  const auto codes = comm_test::run_ranks(ranks, [&](unsigned r) {
    try {
      return body(r);
    } catch (const hogwild::Error& e) {
      std::snprintf(reports[r].message, sizeof reports[r].message, "%s", e.what());
      reports[r].when = now();
      throw;
    }
  });
  std::vector<Outcome> outcomes;
  for (unsigned r = 0; r < ranks; ++r) outcomes.push_back({codes[r], reports[r].message, reports[r].when});
  return outcomes;
}

// Seconds per rank, written by the ranks.
struct Seconds {
  comm_test::Shared shared{kRanks * sizeof(double)};
  double& operator[](unsigned rank) { return shared.as<double>()[rank]; }
};

std::vector<int> codes(const std::vector<Outcome>& outcomes) {
  std::vector<int> c;
  for (const auto& o : outcomes) c.push_back(o.code);
  return c;
}

// Runs fn, leaving in `seconds` how long it took, even when it throws.
template <class Fn>
void timed(double& seconds, Fn&& fn) {
  const double t0 = now();
  try {
    fn();
  } catch (...) {
    seconds = now() - t0;
    throw;
  }
  seconds = now() - t0;
}

// A fresh rendezvous directory; options for rank r of a run in it.
struct Rendezvous {
  hogwild::test::TempDir dir;
  std::string text = "file:" + dir.path().string();
  GlooOptions options(unsigned rank, const std::string& run_id = "run",
                      std::chrono::milliseconds timeout = 10s) const {
    return {text, run_id, "", "node " + std::to_string(rank), timeout, "", "this test"};
  }
  std::size_t keys() const { return hogwild::test::entries_in(dir.path()); }  // the store's
};

// Values that sum exactly in any order: the sum over ranks is whole(i, 0) * 6.
template <class T> T whole(std::size_t i, unsigned rank) {
  return static_cast<T>((i % 97) * (rank + 1));
}
// Values whose sum depends on the order of the adds.
template <class T> T fraction(std::size_t i, unsigned rank) {
  return static_cast<T>(0.1) * static_cast<T>(i % 13 + 1) / static_cast<T>(rank + 1.7) +
         static_cast<T>(1e-3) * static_cast<T>(i % 7);
}

// The sum in rank order, as each rank's slice is summed (and as shm sums).
template <class T> T rank_order_sum(std::size_t i) {
  T sum = fraction<T>(i, 0);
  for (unsigned r = 1; r < kRanks; ++r) sum += fraction<T>(i, r);
  return sum;
}

// reduce_scatter, all_gather and all_reduce on sizes around the slices and over
// several segments: integers exact; fractions summed in rank order, so the bits
// are known (and the same on every rank); all_gather alone copies each owner's
// slice over NaNs.
template <class T>
void rank_order() {
  const std::vector<std::size_t> sizes{0, 1, 2, 3, 4, 7919, (std::size_t{1} << 19) * 3 + 5};
  Rendezvous rv;
  const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    for (std::size_t n : sizes) {
      const auto mine = hogwild::slice_of(n, rank, kRanks);
      std::vector<T> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = whole<T>(i, rank);
      comm->reduce_scatter(std::span<T>(v));
      for (std::size_t i = mine.begin; i < mine.end; ++i)
        if (v[i] != whole<T>(i, 0) * 6) return 20;
      for (std::size_t i = 0; i < n; ++i)
        if (i < mine.begin || i >= mine.end) v[i] = -1;
      comm->all_gather(std::span<T>(v));
      for (std::size_t i = 0; i < n; ++i)
        if (v[i] != whole<T>(i, 0) * 6) return 21;

      for (std::size_t i = 0; i < n; ++i) v[i] = fraction<T>(i, rank);
      comm->reduce_scatter(std::span<T>(v));
      comm->all_gather(std::span<T>(v));
      for (std::size_t i = 0; i < n; ++i)
        if (v[i] != rank_order_sum<T>(i)) return 22;
      for (auto op : {hogwild::Reduce::sum, hogwild::Reduce::mean}) {
        for (std::size_t i = 0; i < n; ++i) v[i] = fraction<T>(i, rank);
        comm->all_reduce(std::span<T>(v), op);
        for (std::size_t i = 0; i < n; ++i) {
          const T sum = rank_order_sum<T>(i);
          if (v[i] != (op == hogwild::Reduce::mean ? sum / static_cast<T>(kRanks) : sum)) return 23;
        }
      }

      std::fill(v.begin(), v.end(), std::numeric_limits<T>::quiet_NaN());
      for (std::size_t i = mine.begin; i < mine.end; ++i) v[i] = static_cast<T>(rank * 1000 + i % 1000);
      comm->all_gather(std::span<T>(v));
      for (unsigned owner = 0; owner < kRanks; ++owner) {
        const auto theirs = hogwild::slice_of(n, owner, kRanks);
        for (std::size_t i = theirs.begin; i < theirs.end; ++i)
          if (v[i] != static_cast<T>(owner * 1000 + i % 1000)) return 24;
      }
    }
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
}

}  // namespace

TEST_CASE("gloo: slices as slice_of says, sums in rank order (the bits shm gives), floats and doubles") {
  rank_order<float>();
  rank_order<double>();
}

TEST_CASE("gloo and shm: the same bits from the same data") {
  const std::size_t n = 300007;
  comm_test::Shared hashes(2 * kRanks * 4 * sizeof(std::uint64_t));
  auto* h = hashes.as<std::uint64_t>();
  // Each rank's fractions through all_reduce (sum, mean) and reduce_scatter +
  // all_gather, floats and doubles: four hashes per rank and backend.
  auto run = [&](hogwild::Communicator& c, std::uint64_t* out) {
    std::vector<float> f(n);
    std::vector<double> d(n);
    int k = 0;
    for (auto op : {hogwild::Reduce::sum, hogwild::Reduce::mean}) {
      for (std::size_t i = 0; i < n; ++i) f[i] = fraction<float>(i, c.rank());
      for (std::size_t i = 0; i < n; ++i) d[i] = fraction<double>(i, c.rank());
      c.all_reduce(std::span<float>(f), op);
      if (op == hogwild::Reduce::sum) {
        c.reduce_scatter(std::span<double>(d));
        c.all_gather(std::span<double>(d));
      } else {
        c.all_reduce(std::span<double>(d), op);
      }
      out[k++] = comm_test::fnv(f.data(), n * sizeof(float));
      out[k++] = comm_test::fnv(d.data(), n * sizeof(double));
    }
  };
  Rendezvous rv;
  CHECK(codes(run_reporting(kRanks, [&](unsigned rank) {
          auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
          run(*comm, h + rank * 4);
          return 0;
        })) == std::vector<int>(kRanks, 0));
  const std::size_t bytes = ShmCommunicator::region_bytes(kRanks);
  comm_test::Shared region(bytes);
  ShmCommunicator::prepare({region.p, bytes}, kRanks);
  CHECK(codes(run_reporting(kRanks, [&](unsigned rank) {
          ShmCommunicator comm({region.p, bytes}, rank, kRanks, 10s);
          run(comm, h + (kRanks + rank) * 4);
          return 0;
        })) == std::vector<int>(kRanks, 0));
  for (unsigned r = 0; r < 2 * kRanks; ++r)
    for (int k = 0; k < 4; ++k) CHECK(h[r * 4 + k] == h[k]);
}

TEST_CASE("gloo: empty data in every collective; barrier waits for the last rank") {
  Rendezvous rv;
  Seconds waited;
  const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    if (comm->backend() != "gloo" || comm->rank() != rank || comm->size() != kRanks) return 30;
    std::vector<float> f;
    std::vector<double> d;
    std::vector<std::byte> b;
    comm->all_reduce(std::span<float>(f), hogwild::Reduce::mean);
    comm->all_reduce(std::span<double>(d));
    comm->reduce_scatter(std::span<float>(f));
    comm->all_gather(std::span<double>(d));
    comm->broadcast(b, 1);
    if (!comm->all_gather(std::span<const hogwild::IndexValue>()).empty()) return 31;
    if (rank == 0) std::this_thread::sleep_for(300ms);
    timed(waited[rank], [&] { comm->barrier(); });
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  CHECK(waited[1] > 0.25);
  CHECK(waited[2] > 0.25);
}

TEST_CASE("gloo: abort() from another thread ends this rank's collective in progress, and the others'") {
  Rendezvous rv;
  Seconds waited;
  const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    std::jthread aborter;
    if (rank == 1)
      aborter = std::jthread([&] {
        std::this_thread::sleep_for(300ms);
        comm->abort("stopped from a thread");
      });
    else
      std::this_thread::sleep_for(1s);
    timed(waited[rank], [&] { comm->barrier(); });
    return 40;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, hogwild::kExitWorkerFailed));
  for (unsigned r = 0; r < kRanks; ++r) {
    CHECK(outcomes[r].message.find("rank 1 (node 1) aborted: stopped from a thread") !=
          std::string::npos);
    CHECK(waited[r] < 1.0);  // the timeout is 10 s
  }
}

TEST_CASE("gloo: a stuck rank: the others time out and name it; a rank that never joins is named") {
  constexpr auto kTimeout = 2s;
  {
    Rendezvous rv;
    Seconds waited;
    const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
      auto comm = hogwild::make_gloo_communicator(rv.options(rank, "run", kTimeout), rank, kRanks);
      comm->barrier();
      if (rank == 2) std::this_thread::sleep_for(kTimeout + 1500ms);
      std::vector<float> v(100, 1.0f);
      timed(waited[rank], [&] { comm->all_reduce(std::span<float>(v)); });
      return 50;
    });
    CHECK(codes(outcomes) == std::vector<int>(kRanks, hogwild::kExitWorkerFailed));
    for (unsigned r = 0; r < 2; ++r) {
      CHECK(outcomes[r].message.find("rank 2 (node 2) did not report") != std::string::npos);
      CHECK(waited[r] > 1.9);
      CHECK(waited[r] < 2.0 + 2.0);
    }
    CHECK(waited[2] < 1.0);  // its pairs were closed while it slept
  }
  {
    Rendezvous rv;
    const double t0 = now();
    const auto outcomes = run_reporting(2, [&](unsigned rank) {
      hogwild::make_gloo_communicator(rv.options(rank, "run", kTimeout), rank, kRanks);
      return 51;
    });
    CHECK(codes(outcomes) == std::vector<int>(2, hogwild::kExitWorkerFailed));
    for (const auto& o : outcomes) {
      CHECK(o.message.find("rank(s) 2 did not join run 'run'") != std::string::npos);
      CHECK(o.when - t0 < 2.0 + 2.0);
    }
  }
}

TEST_CASE("gloo: a rendezvous directory serves a second run with a new run id; a used one is refused until its owner erases its keys") {
  Rendezvous rv;
  auto sum_once = [&](const std::string& run_id) {
    return codes(run_reporting(kRanks, [&](unsigned rank) {
      auto comm = hogwild::make_gloo_communicator(rv.options(rank, run_id), rank, kRanks);
      std::vector<float> v{1.0f * (rank + 1)};
      comm->all_reduce(std::span<float>(v));
      return v[0] == 6.0f ? 0 : 60;
    }));
  };
  CHECK(sum_once("first") == std::vector<int>(kRanks, 0));
  CHECK(sum_once("second") == std::vector<int>(kRanks, 0));
  CHECK(sum_once("first") == std::vector<int>(kRanks, hogwild::kExitBadInput));
  // gloo_erase_run: nothing for another owner; every rank's keys for the owner of
  // the rank named.
  const std::size_t written = rv.keys();
  CHECK(written >= 2 * kRanks);
  auto other = rv.options(0, "first");
  other.owner = "another run";
  CHECK(hogwild::gloo_erase_run(other, 0, kRanks));
  CHECK(rv.keys() == written);
  CHECK(hogwild::gloo_erase_run(rv.options(1, "first"), 1, kRanks));
  CHECK(rv.keys() < written);
  CHECK(hogwild::gloo_erase_run(rv.options(2, "second"), 2, kRanks));
  CHECK(rv.keys() == 0);
  CHECK(sum_once("first") == std::vector<int>(kRanks, 0));  // the id is free again
}

TEST_CASE("gloo: NCCL's id goes from rank 0 to the other machines' ranks through the store; rank "
          "0's failure and its absence are said, and its keys are erased with the group's") {
  Rendezvous rv;
  const auto make = [](char (&id)[128]) {
    for (int i = 0; i < 128; ++i) id[i] = static_cast<char>(i * 7 + 3);
  };
  const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
    // The group's own Gloo members beside it (gloo_erase_run erases the keys of
    // groups whose members are ours).
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    char id[128] = {};
    hogwild::detail::store_exchange_nccl_id(rv.options(rank), rank, id, make, nullptr);
    char want[128];
    make(want);
    if (std::memcmp(id, want, sizeof id) != 0) return 90;
    comm->barrier();
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  CHECK(hogwild::gloo_erase_run(rv.options(0), 0, kRanks));
  CHECK(rv.keys() == 0);

  // Rank 0 cannot make an id: every rank says why.
  const auto failed = run_reporting(kRanks, [&](unsigned rank) {
    char id[128];
    hogwild::detail::store_exchange_nccl_id(
        rv.options(rank, "failing"), rank, id,
        [](char (&)[128]) { throw hogwild::Error("ncclGetUniqueId failed: no network"); }, nullptr);
    return 91;
  });
  for (unsigned r = 0; r < kRanks; ++r) {
    CAPTURE(r);
    CHECK(failed[r].code == (r == 0 ? 1 : hogwild::kExitWorkerFailed));
    CHECK(failed[r].message.find("ncclGetUniqueId failed: no network") != std::string::npos);
    if (r > 0) CHECK(failed[r].message.find("rank 0 could not make") != std::string::npos);
  }

  // No rank 0: the others wait out their timeout, then say so; a stopped run ends the wait.
  const auto alone = run_reporting(2, [&](unsigned rank) {
    char id[128];
    std::atomic<std::int32_t> stop{rank == 1 ? 1 : 0};
    hogwild::detail::store_exchange_nccl_id(rv.options(1, "alone", 300ms), 1, id, make, &stop);
    return 92;
  });
  CHECK(alone[0].code == hogwild::kExitWorkerFailed);
  CHECK(alone[0].message.find("wrote no NCCL id to the rendezvous store") != std::string::npos);
  CHECK(alone[0].message.find("within 0.3s") != std::string::npos);
  CHECK(alone[1].code == hogwild::kExitWorkerFailed);
  CHECK(alone[1].message.find("the run stopped") != std::string::npos);
}

TEST_CASE("gloo: ranks that claim the same rank at once: exactly one gets it, the others are told") {
  Rendezvous rv;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string run_id = "taken-" + std::to_string(attempt);
    const auto outcomes = run_reporting(4, [&](unsigned) {
      // All rank 0 of 2; the winner then waits for a rank 1 that never comes.
      hogwild::make_gloo_communicator(rv.options(0, run_id, 300ms), 0, 2);
      return 0;
    });
    std::vector<int> c = codes(outcomes);
    std::sort(c.begin(), c.end());
    CHECK(c == std::vector<int>{hogwild::kExitBadInput, hogwild::kExitBadInput,
                                hogwild::kExitBadInput, hogwild::kExitWorkerFailed});
    for (const auto& o : outcomes)
      if (o.code == hogwild::kExitBadInput)
        CHECK(o.message.find("two nodes were given the same --node-rank") != std::string::npos);
  }
}

TEST_CASE("gloo: a key another node erases while this one reads it is absent at once, not "
          "after gloo's 30 s wait") {
  // The nodes' join reads the other nodes' keys while a failed node erases its own;
  // gloo's FileStore::get waits 30 s for a key that went between a check and the read.
  Rendezvous rv;
  // Key k<i> is set, then erased for good, then k<i+1> ...
  std::atomic<bool> done{false};
  std::atomic<int> current{0};
  std::thread churn([&] {
    auto store = hogwild::detail::open_store(rv.options(1), 2s);
    const std::vector<char> value{'x', 'y'};
    for (int i = 0; !done.load(); ++i) {
      store.set(fmt::format("k{}", i), value);
      current = i;
      std::this_thread::sleep_for(20us);
      store.erase(fmt::format("k{}", i));
    }
  });
  auto store = hogwild::detail::open_store(rv.options(0), 2s);
  double slowest = 0;
  std::size_t found = 0, wrong = 0;
  for (const double t_end = now() + 1.5; now() < t_end && slowest < 1.0;) {
    const double t0 = now();
    const auto value = store.find(fmt::format("k{}", current.load()));
    slowest = std::max(slowest, now() - t0);
    if (value) {
      ++found;
      wrong += *value != "xy";
    }
  }
  done = true;
  churn.join();
  INFO("found " << found << " times");
  CHECK(found > 0);
  CHECK(wrong == 0);
  CHECK(slowest < 1.0);
  // get() waits its timeout for an absent key, then says which.
  const double t0 = now();
  CHECK_THROWS_WITH_AS(store.get("never"), doctest::Contains("did not appear"), gloo::IoException);
  CHECK(now() - t0 < 3.0);
}

TEST_CASE("gloo: bad settings are ConfigErrors that say what is wrong") {
  Rendezvous rv;
  auto refused = [&](const GlooOptions& o, const std::string& says, unsigned rank = 0) {
    try {
      hogwild::make_gloo_communicator(o, rank, kRanks);
      FAIL("accepted: " << o.rendezvous);
    } catch (const ConfigError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(says) != std::string::npos, std::string(e.what()));
    }
  };
  auto with = [&](std::string text) {
    GlooOptions o = rv.options(0);
    o.rendezvous = std::move(text);
    return o;
  };
  for (const char* text : {"", "tcp://host:1", "redis://host", "redis://:6379", "redis://h:0",
                           "redis://h:70000", "redis://h:12x", "file:"})
    refused(with(text), "expected file:DIR");
  refused(with("file:" + rv.dir.file("nowhere")), "does not exist");
  GlooOptions o = rv.options(0);
  o.iface = "nosuchif0";
  refused(o, "network interface 'nosuchif0' does not exist");
  refused(rv.options(3), "rank 3 of 3 ranks", 3);
  o = rv.options(0);
  o.run_id = "";
  refused(o, "a run id is needed");
  CHECK(std::filesystem::is_empty(rv.dir.path()));  // nothing was written
}

namespace {

// Gives the calling process a hostname of its own (a UTS namespace: root, or
// CAP_SYS_ADMIN), as if it ran on another machine.
bool pretend_another_host() {
  const char name[] = "hogwild-elsewhere";
  return unshare(CLONE_NEWUTS) == 0 && sethostname(name, sizeof name - 1) == 0;
}

}  // namespace

TEST_CASE("gloo: ranks on two hosts and no interface: a ConfigError asking for --iface" *
          doctest::test_suite("hostname")) {
  if (codes(run_reporting(1, [](unsigned) { return pretend_another_host() ? 0 : 1; })) !=
      std::vector<int>{0}) {
    hogwild::test::skip("cannot give a process a hostname of its own (needs root or CAP_SYS_ADMIN)");
    return;
  }
  Rendezvous rv;
  auto run = [&](const std::string& run_id, const std::string& iface) {
    return run_reporting(2, [&](unsigned rank) {
      if (rank == 1 && !pretend_another_host()) return 70;
      GlooOptions o = rv.options(rank, run_id);
      o.iface = iface;
      auto comm = hogwild::make_gloo_communicator(o, rank, 2);
      comm->barrier();
      return 0;
    });
  };
  const auto outcomes = run("no-iface", "");
  CHECK(codes(outcomes) == std::vector<int>(2, hogwild::kExitBadInput));
  for (const auto& o : outcomes)
    CHECK(o.message.find("but no network interface was given: pass --iface") != std::string::npos);
  // Named, the interface is trusted (here both are on this machine's loopback).
  CHECK(codes(run("lo", "lo")) == std::vector<int>(2, 0));
}

namespace {

}  // namespace

TEST_CASE("gloo: a redis server that nobody serves is a ConfigError, within the timeout") {
  const GlooOptions o{"redis://127.0.0.1:" + std::to_string(free_port()), "run", "", "", 2s, "", ""};
  const double t0 = now();
  CHECK_THROWS_AS(hogwild::make_gloo_communicator(o, 0, kRanks), ConfigError);
  CHECK(now() - t0 < 2.0);
}

TEST_CASE("gloo: redis rendezvous: three ranks sum, a second run with a new id on the same server" *
          doctest::test_suite("redis")) {
  if (access(kRedisServer, X_OK) != 0) {
    hogwild::test::skip(std::string(kRedisServer) + " is not installed (apt install redis-server)");
    return;
  }
  hogwild::test::TempDir dir;
  RedisServer server(dir);
  for (const char* run_id : {"first", "second"}) {
    const auto outcomes = run_reporting(kRanks, [&](unsigned rank) {
      const GlooOptions o{server.url(), run_id, "", "node " + std::to_string(rank), 10s, "", "me"};
      auto comm = hogwild::make_gloo_communicator(o, rank, kRanks);
      std::vector<float> v(7919);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = whole<float>(i, rank);
      comm->all_reduce(std::span<float>(v));
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != whole<float>(i, 0) * 6) return 80;
      return 0;
    });
    CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  }
  CHECK(server.keys() > 0);
  for (const char* run_id : {"first", "second"})
    CHECK(hogwild::gloo_erase_run({server.url(), run_id, "", "", 10s, "", "me"}, 0, kRanks));
  CHECK(server.keys() == 0);
}

#else  // built without Gloo: every test of this file is a skip, and says why

TEST_CASE("gloo: built without Gloo, make_gloo_communicator says so") {
  CHECK_FALSE(hogwild::gloo_built());
  CHECK_THROWS_AS(hogwild::make_gloo_communicator({}, 0, 1), ConfigError);
  hogwild::test::skip("built without Gloo (libgloo-dev, libhiredis-dev)");
}
TEST_CASE("gloo: redis rendezvous" * doctest::test_suite("redis")) {
  hogwild::test::skip("built without Gloo (libgloo-dev, libhiredis-dev)");
}
TEST_CASE("gloo: ranks on two hosts" * doctest::test_suite("hostname")) {
  hogwild::test::skip("built without Gloo (libgloo-dev, libhiredis-dev)");
}

#endif
