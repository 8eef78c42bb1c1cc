// The Gloo Communicator between real forked ranks on loopback: exact sums and the
// same bits on every rank for every collective, the slice_of layout, sparse lists,
// broadcast from any root, two communicators at once, both rendezvous stores (the
// redis cases, test suite "redis", start their own redis-server), ranks on two
// hosts (suite "hostname": a UTS namespace), and failures: a killed rank, abort(),
// a stuck or missing rank, bad settings.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo.hpp"
#include "hogwild/error.hpp"
#include "support.hpp"

using hogwild::CommError;
using hogwild::ConfigError;
using hogwild::GlooOptions;
using hogwild::IndexValue;
using hogwild::Reduce;
using hogwild::slice_of;
using namespace std::chrono_literals;

namespace {

constexpr unsigned kRanks = 3;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An anonymous MAP_SHARED array: what the forked ranks leave for the test process.
template <class T>
struct Shared {
  explicit Shared(std::size_t count) : n(count) {
    void* m = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    p = static_cast<T*>(m);  // zeroed; T is an implicit-lifetime type
  }
  ~Shared() { munmap(p, n * sizeof(T)); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  T& operator[](std::size_t i) { return p[i]; }
  T* p;
  std::size_t n;
};

struct Outcome {
  int code = -1;        // exit status, 128 + signal when killed, -1000 on a hang
  std::string message;  // the hogwild::Error that ended it, if one did
  double when = 0;      // now() when it ended with an error, or when it called mark()
};
struct Report {
  char message[1024];
  double when;
};
Report* g_report = nullptr;  // this rank's, in a forked rank
void mark() { g_report->when = now(); }

// Forks `ranks` processes running body(rank): its return value is the exit status;
// a hogwild::Error exits with its exit_code(), leaving its message. Waits up to
// `limit` seconds, then kills what is left; reaps every child.
std::vector<Outcome> run_ranks(unsigned ranks, const std::function<int(unsigned)>& body,
                               double limit = 120) {
  Shared<Report> reports(ranks);
  std::vector<pid_t> pids;
  std::fflush(nullptr);  // else each rank writes what the test process has buffered again
  for (unsigned r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      g_report = &reports[r];
      int code = 1;
      try {
        code = body(r);
      } catch (const hogwild::Error& e) {
        std::snprintf(g_report->message, sizeof g_report->message, "%s", e.what());
        g_report->when = now();
        code = e.exit_code();
      } catch (const std::exception& e) {
        std::snprintf(g_report->message, sizeof g_report->message, "unexpected: %s", e.what());
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<Outcome> outcomes(ranks);
  const double deadline = now() + limit;
  for (unsigned r = 0; r < ranks; ++r) {
    const int code = hogwild::test::wait_exit(pids[r], std::max(0.0, deadline - now()));
    outcomes[r].code = code < 0 && code != -1000 ? 128 - code : code;
    outcomes[r].message = reports[r].message;
    outcomes[r].when = reports[r].when;
    if (!outcomes[r].message.empty()) MESSAGE("rank " << r << ": " << outcomes[r].message);
  }
  return outcomes;
}

std::vector<int> codes(const std::vector<Outcome>& outcomes) {
  std::vector<int> c;
  for (const auto& o : outcomes) c.push_back(o.code);
  return c;
}

// A fresh rendezvous directory; options for rank r of a run in it.
struct Rendezvous {
  hogwild::test::TempDir dir;
  std::string text = "file:" + dir.path().string();
  GlooOptions options(unsigned rank, const std::string& run_id = "run",
                      std::chrono::milliseconds timeout = 10s, const std::string& tag = "") const {
    return {text, run_id, "", "node " + std::to_string(rank), timeout, tag};
  }
};

std::uint64_t fnv(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Values that sum exactly in any order: the sum over ranks is base(i) * 6.
template <class T> T whole(std::size_t i, unsigned rank) {
  return static_cast<T>((i % 97) * (rank + 1));
}
// Values whose sum depends on the order of the adds.
template <class T> T fraction(std::size_t i, unsigned rank, int round) {
  return static_cast<T>(0.1) * static_cast<T>(i % 13 + 1) / static_cast<T>(rank + 1.7 + round) +
         static_cast<T>(1e-3) * static_cast<T>(i % 7);
}
template <class T> double fraction_sum(std::size_t i, int round) {
  double s = 0;
  for (unsigned r = 0; r < kRanks; ++r) s += static_cast<double>(fraction<T>(i, r, round));
  return s;
}

bool gloo_here() {
  if (hogwild::gloo_built()) return true;
  hogwild::test::skip("built without Gloo (libgloo-dev, libhiredis-dev)");
  return false;
}

// all_reduce over `sizes`, the same buffers again and again: round 0 and the mean
// exact, rounds 1 and 2 fractional; each rank leaves a hash of every fractional
// result in hashes[rank][size][round - 1].
template <class T>
void all_reduce_everywhere(const std::vector<std::size_t>& sizes) {
  Rendezvous rv;
  Shared<std::uint64_t> hashes(kRanks * sizes.size() * 2);
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    if (comm->backend() != "gloo" || comm->rank() != rank || comm->size() != kRanks) return 10;
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      std::vector<T> v(sizes[s]);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = whole<T>(i, rank);
      comm->all_reduce(std::span<T>(v));
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != whole<T>(i, 0) * 6) return 11;
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = whole<T>(i, rank);
      comm->all_reduce(std::span<T>(v), Reduce::mean);
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != whole<T>(i, 0) * 2) return 12;
      for (int round = 1; round <= 2; ++round) {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = fraction<T>(i, rank, round);
        comm->all_reduce(std::span<T>(v));
        for (std::size_t i = 0; i < v.size(); i += 101)
          if (std::abs(v[i] - fraction_sum<T>(i, round)) > 1e-5 * fraction_sum<T>(i, round)) return 13;
        hashes[(rank * sizes.size() + s) * 2 + round - 1] = fnv(v.data(), v.size() * sizeof(T));
      }
    }
    comm->barrier();
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  for (unsigned r = 1; r < kRanks; ++r)
    for (std::size_t k = 0; k < sizes.size() * 2; ++k)
      CHECK(hashes[r * sizes.size() * 2 + k] == hashes[k]);
}

// reduce_scatter then all_gather on sizes around the slices and over a segment:
// the owned slice exact after reduce_scatter, everything exact after all_gather, the
// same bits everywhere with fractions; all_gather alone copies each owner's slice.
template <class T>
void slices_everywhere() {
  const std::vector<std::size_t> sizes{0, 1, 2, 3, 4, 7919, (1u << 19) * 3 + 5};
  Rendezvous rv;
  Shared<std::uint64_t> hashes(kRanks * sizes.size());
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      const std::size_t n = sizes[s];
      const auto mine = slice_of(n, rank, kRanks);
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

      for (std::size_t i = 0; i < n; ++i) v[i] = fraction<T>(i, rank, 1);
      comm->reduce_scatter(std::span<T>(v));
      comm->all_gather(std::span<T>(v));
      for (std::size_t i = 0; i < n; i += 101)
        if (std::abs(v[i] - fraction_sum<T>(i, 1)) > 1e-5 * fraction_sum<T>(i, 1)) return 22;
      hashes[rank * sizes.size() + s] = fnv(v.data(), n * sizeof(T));

      std::fill(v.begin(), v.end(), std::numeric_limits<T>::quiet_NaN());
      for (std::size_t i = mine.begin; i < mine.end; ++i) v[i] = static_cast<T>(rank * 1000 + i % 1000);
      comm->all_gather(std::span<T>(v));
      for (unsigned owner = 0; owner < kRanks; ++owner) {
        const auto theirs = slice_of(n, owner, kRanks);
        for (std::size_t i = theirs.begin; i < theirs.end; ++i)
          if (v[i] != static_cast<T>(owner * 1000 + i % 1000)) return 23;
      }
    }
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  for (unsigned r = 1; r < kRanks; ++r)
    for (std::size_t s = 0; s < sizes.size(); ++s)
      CHECK(hashes[r * sizes.size() + s] == hashes[s]);
}

}  // namespace

TEST_CASE("all_reduce of floats: exact sums and means, the same bits on every rank, 0 to 64 MiB") {
  if (!gloo_here()) return;
  all_reduce_everywhere<float>({0, 1, kRanks - 1, kRanks, kRanks + 1, 7919, 16u << 20});
}

TEST_CASE("all_reduce of doubles: exact sums and means, the same bits on every rank") {
  if (!gloo_here()) return;
  all_reduce_everywhere<double>({0, 1, kRanks + 1, 7919, (1u << 18) + 3});
}

TEST_CASE("reduce_scatter and all_gather follow slice_of, floats and doubles") {
  if (!gloo_here()) return;
  slices_everywhere<float>();
  slices_everywhere<double>();
}

TEST_CASE("sparse all_gather: lists of any length, concatenated in rank order") {
  if (!gloo_here()) return;
  Rendezvous rv;
  auto list = [](unsigned rank, std::size_t length) {
    std::vector<IndexValue> l;
    for (std::size_t k = 0; k < length; ++k)
      l.push_back({static_cast<std::uint32_t>(rank * 1000000 + k), static_cast<float>(rank) + 0.5f * k});
    return l;
  };
  const std::vector<std::vector<std::size_t>> lengths{{0, 2, 4}, {0, 0, 0}, {3, 0, 0}, {0, 100000, 7}};
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    for (const auto& each : lengths) {
      std::vector<IndexValue> expect;
      for (unsigned r = 0; r < kRanks; ++r) {
        const auto l = list(r, each[r]);
        expect.insert(expect.end(), l.begin(), l.end());
      }
      const auto mine = list(rank, each[rank]);
      if (comm->all_gather(std::span<const IndexValue>(mine)) != expect) return 30;
    }
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
}

TEST_CASE("broadcast from a non-zero root; barrier waits for the last rank") {
  if (!gloo_here()) return;
  Rendezvous rv;
  Shared<double> waited(kRanks);
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    for (unsigned root : {2u, 1u, 0u})
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{(1 << 20) + 3}}) {
        std::vector<std::byte> b(n);
        if (rank == root)
          for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 7 + root) % 251);
        comm->broadcast(b, root);
        for (std::size_t i = 0; i < n; ++i)
          if (b[i] != static_cast<std::byte>((i * 7 + root) % 251)) return 40;
      }
    if (rank == 0) std::this_thread::sleep_for(300ms);
    const double t0 = now();
    comm->barrier();
    waited[rank] = now() - t0;
    return 0;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  CHECK(waited[1] > 0.25);
  CHECK(waited[2] > 0.25);
}

TEST_CASE("two communicators with distinct tags run collectives at once from two threads") {
  if (!gloo_here()) return;
  Rendezvous rv;
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto a = hogwild::make_gloo_communicator(rv.options(rank, "run", 10s, "a"), rank, kRanks);
    auto b = hogwild::make_gloo_communicator(rv.options(rank, "run", 10s, "b"), rank, kRanks);
    std::atomic<int> failed{0};
    std::thread other([&] {
      try {
        std::vector<float> v(10007);
        for (int round = 0; round < 30; ++round) {
          for (std::size_t i = 0; i < v.size(); ++i) v[i] = whole<float>(i + round, rank);
          a->all_reduce(std::span<float>(v));
          for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] != whole<float>(i + round, 0) * 6) failed = 50;
        }
      } catch (...) {
        failed = 51;
      }
    });
    std::vector<double> w(5003);
    for (int round = 0; round < 30; ++round) {
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = whole<double>(i * 3 + round, rank);
      b->all_reduce(std::span<double>(w));
      for (std::size_t i = 0; i < w.size(); ++i)
        if (w[i] != whole<double>(i * 3 + round, 0) * 6) failed = 52;
    }
    other.join();
    return failed.load();
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
}

TEST_CASE("a rendezvous directory serves a second run with a new run id; a used run id is refused") {
  if (!gloo_here()) return;
  Rendezvous rv;
  auto sum_once = [&](const std::string& run_id) {
    return codes(run_ranks(kRanks, [&](unsigned rank) {
      auto comm = hogwild::make_gloo_communicator(rv.options(rank, run_id), rank, kRanks);
      std::vector<float> v{1.0f * (rank + 1)};
      comm->all_reduce(std::span<float>(v));
      return v[0] == 6.0f ? 0 : 60;
    }));
  };
  CHECK(sum_once("first") == std::vector<int>(kRanks, 0));
  CHECK(sum_once("second") == std::vector<int>(kRanks, 0));
  CHECK(sum_once("first") == std::vector<int>(kRanks, hogwild::kExitBadInput));
}

TEST_CASE("a killed rank: the others throw CommError naming it, within the timeout") {
  if (!gloo_here()) return;
  Rendezvous rv;
  constexpr auto kTimeout = 3s;
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank, "run", kTimeout), rank, kRanks);
    std::vector<float> v(1000, 1.0f);
    for (int round = 0; round < 100000; ++round) {
      if (rank == 2 && round == 3) {
        mark();
        kill(getpid(), SIGKILL);
      }
      comm->all_reduce(std::span<float>(v));
    }
    return 70;
  });
  CHECK(codes(outcomes) == std::vector<int>{3, 3, 128 + SIGKILL});
  for (unsigned r = 0; r < 2; ++r) {
    MESSAGE("rank " << r << " failed " << outcomes[r].when - outcomes[2].when << " s after the kill");
    CHECK(outcomes[r].message.find("rank 2 (node 2) did not report") != std::string::npos);
    CHECK(outcomes[r].when - outcomes[2].when < 3.0 + 2.0);
  }
}

TEST_CASE("abort() from one rank: every rank's next collective throws CommError naming it") {
  if (!gloo_here()) return;
  Rendezvous rv;
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    comm->barrier();
    if (rank == 1) comm->abort("out of patience");
    std::vector<double> v(100, 1.0);
    comm->all_reduce(std::span<double>(v));
    return 80;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, hogwild::kExitWorkerFailed));
  for (unsigned r = 0; r < kRanks; ++r)
    CHECK(outcomes[r].message.find("rank 1 (node 1) aborted: out of patience") != std::string::npos);
}

TEST_CASE("abort() from another thread ends this rank's collective in progress, and the others'") {
  if (!gloo_here()) return;
  Rendezvous rv;
  Shared<double> waited(kRanks);
  const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
    auto comm = hogwild::make_gloo_communicator(rv.options(rank), rank, kRanks);
    std::thread aborter;
    if (rank == 1)
      aborter = std::thread([&] {
        std::this_thread::sleep_for(300ms);
        comm->abort("stopped from a thread");
      });
    else
      std::this_thread::sleep_for(1s);
    const double t0 = now();
    try {
      comm->barrier();
    } catch (...) {
      waited[rank] = now() - t0;
      if (aborter.joinable()) aborter.join();
      throw;
    }
    return 90;
  });
  CHECK(codes(outcomes) == std::vector<int>(kRanks, hogwild::kExitWorkerFailed));
  for (unsigned r = 0; r < kRanks; ++r) {
    CHECK(outcomes[r].message.find("rank 1 (node 1) aborted: stopped from a thread") !=
          std::string::npos);
    CHECK(waited[r] < 1.0);  // the timeout is 10 s
  }
}

TEST_CASE("a stuck rank: the others time out and name it; a rank that never joins is named") {
  if (!gloo_here()) return;
  constexpr auto kTimeout = 2s;
  {
    Rendezvous rv;
    Shared<double> waited(kRanks);
    const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
      auto comm = hogwild::make_gloo_communicator(rv.options(rank, "run", kTimeout), rank, kRanks);
      comm->barrier();
      if (rank == 2) std::this_thread::sleep_for(kTimeout + 1500ms);
      std::vector<float> v(100, 1.0f);
      const double t0 = now();
      try {
        comm->all_reduce(std::span<float>(v));
      } catch (...) {
        waited[rank] = now() - t0;
        throw;
      }
      return 100;
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
    const auto outcomes = run_ranks(2, [&](unsigned rank) {
      hogwild::make_gloo_communicator(rv.options(rank, "run", kTimeout), rank, kRanks);
      return 101;
    });
    CHECK(codes(outcomes) == std::vector<int>(2, hogwild::kExitWorkerFailed));
    for (const auto& o : outcomes) {
      CHECK(o.message.find("rank(s) 2 did not join run 'run'") != std::string::npos);
      CHECK(o.when - t0 < 2.0 + 2.0);
    }
  }
}

TEST_CASE("bad settings are ConfigErrors that say what is wrong") {
  if (!gloo_here()) return;
  Rendezvous rv;
  auto refused = [&](GlooOptions o, const std::string& says, unsigned rank = 0,
                     unsigned size = kRanks) {
    try {
      hogwild::make_gloo_communicator(o, rank, size);
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

TEST_CASE("ranks on two hosts and no interface: a ConfigError asking for --iface" *
          doctest::test_suite("hostname")) {
  if (!gloo_here()) return;
  if (codes(run_ranks(1, [](unsigned) { return pretend_another_host() ? 0 : 1; })) != std::vector<int>{0}) {
    hogwild::test::skip("cannot give a process a hostname of its own (needs root or CAP_SYS_ADMIN)");
    return;
  }
  Rendezvous rv;
  auto run = [&](const std::string& run_id, const std::string& iface) {
    return run_ranks(2, [&](unsigned rank) {
      if (rank == 1 && !pretend_another_host()) return 120;
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

// A TCP port nothing listens on (now).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

bool accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

constexpr const char* kRedisServer = "/usr/bin/redis-server";

// A redis-server of this test alone, on a free port, stopped (and reaped) with it.
class RedisServer {
 public:
  explicit RedisServer(const hogwild::test::TempDir& dir) : port_(free_port()) {
    std::fflush(nullptr);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stdout);
      const std::string port = std::to_string(port_);
      execl(kRedisServer, kRedisServer, "--port", port.c_str(), "--bind", "127.0.0.1", "--save",
            "", "--appendonly", "no", "--dir", dir.path().c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !accepts(port_); ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(accepts(port_));
  }
  ~RedisServer() {
    kill(pid_, SIGTERM);
    if (hogwild::test::wait_exit(pid_, 10) == -1000) MESSAGE("redis-server had to be killed");
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("a redis server that nobody serves is a ConfigError, within the timeout") {
  if (!gloo_here()) return;
  GlooOptions o{"redis://127.0.0.1:" + std::to_string(free_port()), "run", "", "", 2s, ""};
  const double t0 = now();
  CHECK_THROWS_AS(hogwild::make_gloo_communicator(o, 0, kRanks), ConfigError);
  CHECK(now() - t0 < 2.0);
}

TEST_CASE("redis rendezvous: three ranks sum, a second run with a new id on the same server" *
          doctest::test_suite("redis")) {
  if (!gloo_here()) return;
  if (access(kRedisServer, X_OK) != 0) {
    hogwild::test::skip(std::string(kRedisServer) + " is not installed (apt install redis-server)");
    return;
  }
  hogwild::test::TempDir dir;
  RedisServer server(dir);
  for (const char* run_id : {"first", "second"}) {
    const auto outcomes = run_ranks(kRanks, [&](unsigned rank) {
      GlooOptions o{server.url(), run_id, "", "node " + std::to_string(rank), 10s, ""};
      auto comm = hogwild::make_gloo_communicator(o, rank, kRanks);
      std::vector<float> v(7919);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = whole<float>(i, rank);
      comm->all_reduce(std::span<float>(v));
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != whole<float>(i, 0) * 6) return 110;
      return 0;
    });
    CHECK(codes(outcomes) == std::vector<int>(kRanks, 0));
  }
}
