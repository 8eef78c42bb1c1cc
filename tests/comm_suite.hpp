// The suite every Communicator backend passes, between real forked processes:
// exact sums, the same bits on every rank, slices, variable-length gathers,
// broadcasts, repeated and concurrent collectives, and a group that fails fast and
// names the rank when one aborts or dies. A backend's test file defines a
// CommBackend and expands HOGWILD_COMM_SUITE(name, backend()).
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"

namespace comm_test {

using hogwild::Communicator;
using Millis = std::chrono::milliseconds;

struct CommBackend {
  std::string name;
  // In the parent, before the ranks are forked: a fresh group of `size` ranks for
  // each tag in [0, tags).
  std::function<void(unsigned size, unsigned tags)> prepare;
  // In rank `rank`'s process: its communicator of group `tag`.
  std::function<std::unique_ptr<Communicator>(unsigned rank, unsigned size, unsigned tag,
                                              Millis timeout)>
      make;
  // After the ranks are gone: remove what prepare made.
  std::function<void()> cleanup = [] {};
};

// An anonymous MAP_SHARED mapping: what the forked ranks report to the parent in.
struct Shared {
  explicit Shared(std::size_t bytes) : size(bytes) {
    p = static_cast<std::byte*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(p != MAP_FAILED);
  }
  ~Shared() { munmap(p, size); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  template <class T>
  T* as() const { return reinterpret_cast<T*>(p); }
  std::byte* p;
  std::size_t size;
};

// Forks `ranks` children running body(rank); a child's exit status is body's
// return value (1 on an exception other than hogwild::Error, whose exit code it
// takes). Returns the statuses in rank order (128 + signal for a killed one).
inline std::vector<int> run_ranks(unsigned ranks, const std::function<int(unsigned)>& body) {
  std::vector<pid_t> pids;
  for (unsigned r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 1;
      try {
        code = body(r);
      } catch (const hogwild::Error& e) {
        std::fprintf(stderr, "rank %u: %s\n", r, e.what());
        code = e.exit_code();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %u: %s\n", r, e.what());
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// A group of `ranks` running body(comm) on tag 0; the statuses.
inline std::vector<int> run_group(const CommBackend& b, unsigned ranks, Millis timeout,
                                  const std::function<int(Communicator&)>& body) {
  b.prepare(ranks, 1);
  const auto codes = run_ranks(ranks, [&](unsigned r) {
    auto comm = b.make(r, ranks, 0, timeout);
    return body(*comm);
  });
  b.cleanup();
  return codes;
}

inline std::uint64_t fnv(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

// Rank r's integer-valued element i: every sum is exact in any order.
inline double int_value(std::size_t i, unsigned r) {
  return static_cast<double>(static_cast<long>((i * (r + 3) + r) % 1001) - 500);
}

// Exact integer sums for lengths 0, 1, size-1, size, size+1, an odd prime, and
// 64 MiB, float and double, three rounds on the same buffers (the last of which
// repeats the first: a stale buffer would show).
inline void exact_sums(const CommBackend& b, unsigned ranks) {
  const std::vector<std::size_t> lengths{0, 1, ranks - 1, ranks, ranks + 1, 7919,
                                         std::size_t{16} << 20};
  const auto codes = run_group(b, ranks, Millis(30000), [&](Communicator& c) {
    int bad = 0;
    auto check = [&]<class T>(std::vector<T>& v, int round) {
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<T>(int_value(i, c.rank()) * (round + 1));
      c.all_reduce(std::span<T>(v));
      for (std::size_t i = 0; i < v.size(); ++i) {
        double want = 0;
        for (unsigned r = 0; r < ranks; ++r) want += int_value(i, r) * (round + 1);
        if (v[i] != static_cast<T>(want) && bad++ < 5)
          std::fprintf(stderr, "rank %u: n=%zu [%zu] = %g, want %g\n", c.rank(), v.size(), i,
                       static_cast<double>(v[i]), want);
      }
    };
    for (std::size_t n : lengths)
      for (int round : {0, 1, 0}) {
        std::vector<float> f(n);
        check(f, round);
        std::vector<double> d(n / 2);
        check(d, round);
      }
    return bad ? 10 : 0;
  });
  CHECK(codes == std::vector<int>(ranks, 0));
}

// Fractions (whose sum depends on the order): every rank gets the same bits, for
// sum and mean, run after run on the same buffers.
inline void identical_bits(const CommBackend& b, unsigned ranks) {
  const std::size_t n = 3 * (std::size_t{1} << 18) + 17;
  Shared hashes(ranks * 8 * sizeof(std::uint64_t));
  const auto codes = run_group(b, ranks, Millis(30000), [&](Communicator& c) {
    std::vector<float> v(n);
    std::vector<double> d(n / 3);
    for (int round = 0; round < 4; ++round) {
      for (std::size_t i = 0; i < n; ++i)
        v[i] = std::sin(static_cast<float>(i * (c.rank() + 1) + round)) * 1e3f / 7.0f;
      for (std::size_t i = 0; i < d.size(); ++i)
        d[i] = std::cos(static_cast<double>(i) + c.rank() + round) / 3.0;
      const hogwild::Reduce op = round % 2 ? hogwild::Reduce::mean : hogwild::Reduce::sum;
      c.all_reduce(std::span<float>(v), op);
      c.all_reduce(std::span<double>(d), op);
      hashes.as<std::uint64_t>()[c.rank() * 8 + 2 * round] = fnv(v.data(), n * sizeof(float));
      hashes.as<std::uint64_t>()[c.rank() * 8 + 2 * round + 1] =
          fnv(d.data(), d.size() * sizeof(double));
      if (round == 1) {  // a mean of ranks' values: within rounding of sum / size
        double want = 0;
        for (unsigned r = 0; r < ranks; ++r) want += std::sin(static_cast<float>(5 * (r + 1) + 1)) * 1e3f / 7.0f;
        if (std::abs(v[5] - want / ranks) > 1e-3) return 11;
      }
    }
    return 0;
  });
  REQUIRE(codes == std::vector<int>(ranks, 0));
  for (unsigned r = 1; r < ranks; ++r)
    for (int k = 0; k < 8; ++k)
      CHECK(hashes.as<std::uint64_t>()[r * 8 + k] == hashes.as<std::uint64_t>()[k]);
}

// reduce_scatter leaves each rank its slice's sums; all_gather then completes them.
inline void slices(const CommBackend& b, unsigned ranks) {
  const auto codes = run_group(b, ranks, Millis(30000), [&](Communicator& c) {
    for (std::size_t n : {std::size_t{0}, std::size_t{2}, std::size_t{ranks + 1},
                          std::size_t{100003}, std::size_t{1} << 20}) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(int_value(i, c.rank()));
      c.reduce_scatter(std::span<float>(v));
      const hogwild::Slice s = hogwild::slice_of(n, c.rank(), c.size());
      auto want = [&](std::size_t i) {
        double w = 0;
        for (unsigned r = 0; r < ranks; ++r) w += int_value(i, r);
        return static_cast<float>(w);
      };
      for (std::size_t i = s.begin; i < s.end; ++i)
        if (v[i] != want(i)) return 12;
      // Only the own slice is defined: spoil the rest, all_gather must restore it.
      for (std::size_t i = 0; i < n; ++i)
        if (i < s.begin || i >= s.end) v[i] = -1e9f;
      c.all_gather(std::span<float>(v));
      for (std::size_t i = 0; i < n; ++i)
        if (v[i] != want(i)) return 13;
      std::vector<double> d(n);
      for (std::size_t i = s.begin; i < s.end; ++i) d[i] = static_cast<double>(i) * 0.5;
      c.all_gather(std::span<double>(d));
      for (std::size_t i = 0; i < n; ++i)
        if (d[i] != static_cast<double>(i) * 0.5) return 14;
    }
    return 0;
  });
  CHECK(codes == std::vector<int>(ranks, 0));
}

// Lists of different lengths, one longer than any chunk, one empty, in rank order.
inline void sparse_gather(const CommBackend& b, unsigned ranks) {
  auto list = [](unsigned r) {
    const std::size_t n = r == 0 ? 0 : r == 1 ? 70001 : 3 * r;
    std::vector<hogwild::IndexValue> l(n);
    for (std::size_t i = 0; i < n; ++i)
      l[i] = {static_cast<std::uint32_t>(i * 7 + r), static_cast<float>(r) + 0.25f};
    return l;
  };
  const auto codes = run_group(b, ranks, Millis(30000), [&](Communicator& c) {
    std::vector<hogwild::IndexValue> want;
    for (unsigned r = 0; r < ranks; ++r) {
      const auto l = list(r);
      want.insert(want.end(), l.begin(), l.end());
    }
    for (int round = 0; round < 2; ++round)
      if (c.all_gather(std::span<const hogwild::IndexValue>(list(c.rank()))) != want) return 15;
    return 0;
  });
  CHECK(codes == std::vector<int>(ranks, 0));
}

// From the last rank, more bytes than a chunk and not a multiple of anything.
inline void broadcasts(const CommBackend& b, unsigned ranks) {
  const auto codes = run_group(b, ranks, Millis(30000), [&](Communicator& c) {
    for (unsigned root : {ranks - 1, 0u}) {
      std::vector<std::byte> v((std::size_t{1} << 20) + 3, std::byte{0});
      if (c.rank() == root)
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>(i * 31 + root);
      c.broadcast(v, root);
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != static_cast<std::byte>(i * 31 + root)) return 16;
      c.barrier();
    }
    return 0;
  });
  CHECK(codes == std::vector<int>(ranks, 0));
}

// Two groups (tags 0 and 1) driven at once by two threads of every rank.
inline void concurrent_tags(const CommBackend& b, unsigned ranks) {
  b.prepare(ranks, 2);
  const auto codes = run_ranks(ranks, [&](unsigned rank) {
    int bad[2] = {0, 0};
    auto work = [&](unsigned tag) {
      try {
        auto c = b.make(rank, ranks, tag, Millis(30000));
        std::vector<float> v(300001);
        for (int round = 0; round < 20; ++round) {
          for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = static_cast<float>(int_value(i + tag, rank) + round);
          c->all_reduce(std::span<float>(v));
          for (std::size_t i = 0; i < v.size(); i += 997) {
            double w = 0;
            for (unsigned r = 0; r < ranks; ++r) w += int_value(i + tag, r) + round;
            if (v[i] != static_cast<float>(w)) bad[tag] = 1;
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %u tag %u: %s\n", rank, tag, e.what());
        bad[tag] = 1;
      }
    };
    std::thread other(work, 1u);
    work(0);
    other.join();
    return bad[0] || bad[1] ? 17 : 0;
  });
  b.cleanup();
  CHECK(codes == std::vector<int>(ranks, 0));
}

// One rank aborts: the others throw CommError naming it, within the timeout.
inline void abort_names_the_rank(const CommBackend& b, unsigned ranks) {
  Shared said(ranks * 256);
  const auto t0 = std::chrono::steady_clock::now();
  const auto codes = run_group(b, ranks, Millis(5000), [&](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    c.all_reduce(std::span<float>(v));
    if (c.rank() == 1) {
      c.abort("rank 1 found bad data");
      return 0;
    }
    try {
      for (;;) c.all_reduce(std::span<float>(v));
    } catch (const hogwild::CommError& e) {
      std::snprintf(reinterpret_cast<char*>(said.p) + c.rank() * 256, 256, "%s", e.what());
      return 3;
    }
  });
  const auto waited = std::chrono::steady_clock::now() - t0;
  for (unsigned r = 0; r < ranks; ++r) {
    CHECK(codes[r] == (r == 1 ? 0 : 3));
    if (r != 1) {
      const std::string m(reinterpret_cast<const char*>(said.p) + r * 256);
      INFO(m);
      CHECK(m.find("rank 1") != std::string::npos);
      CHECK(m.find("bad data") != std::string::npos);
    }
  }
  CHECK(waited < std::chrono::seconds(5));
}

// The last rank is SIGKILLed between collectives: the others throw CommError
// within the timeout (1 s here) plus slack, naming it, and never hang.
inline void dead_rank_surfaces(const CommBackend& b, unsigned ranks) {
  Shared said(ranks * 256);
  const auto t0 = std::chrono::steady_clock::now();
  const auto codes = run_group(b, ranks, Millis(1000), [&](Communicator& c) {
    std::vector<float> v(50000, 1.0f);
    c.all_reduce(std::span<float>(v));
    if (c.rank() == ranks - 1) raise(SIGKILL);
    try {
      for (;;) c.all_reduce(std::span<float>(v));
    } catch (const hogwild::CommError& e) {
      std::snprintf(reinterpret_cast<char*>(said.p) + c.rank() * 256, 256, "%s", e.what());
      return 3;
    }
  });
  const auto waited = std::chrono::steady_clock::now() - t0;
  for (unsigned r = 0; r + 1 < ranks; ++r) {
    CHECK(codes[r] == 3);
    const std::string m(reinterpret_cast<const char*>(said.p) + r * 256);
    INFO(m);
    CHECK(m.find("rank " + std::to_string(ranks - 1)) != std::string::npos);
  }
  CHECK(codes[ranks - 1] == 128 + SIGKILL);
  CHECK(waited < std::chrono::seconds(6));
}

}  // namespace comm_test

#define HOGWILD_COMM_SUITE(NAME, BACKEND)                                                   \
  TEST_CASE(NAME ": exact sums, 0 to 64 MiB, float and double") {                           \
    comm_test::exact_sums(BACKEND, 3);                                                      \
  }                                                                                         \
  TEST_CASE(NAME ": the same bits on every rank, sum and mean") {                           \
    comm_test::identical_bits(BACKEND, 3);                                                  \
  }                                                                                         \
  TEST_CASE(NAME ": reduce_scatter and all_gather by slices") {                             \
    comm_test::slices(BACKEND, 3);                                                          \
  }                                                                                         \
  TEST_CASE(NAME ": variable-length (index, value) gathers") {                              \
    comm_test::sparse_gather(BACKEND, 3);                                                   \
  }                                                                                         \
  TEST_CASE(NAME ": broadcast from any root") { comm_test::broadcasts(BACKEND, 3); }        \
  TEST_CASE(NAME ": two communicators with distinct tags at once") {                        \
    comm_test::concurrent_tags(BACKEND, 3);                                                 \
  }                                                                                         \
  TEST_CASE(NAME ": an abort names the rank, at once") {                                    \
    comm_test::abort_names_the_rank(BACKEND, 3);                                            \
  }                                                                                         \
  TEST_CASE(NAME ": a dead rank surfaces within the timeout") {                             \
    comm_test::dead_rank_surfaces(BACKEND, 3);                                              \
  }
