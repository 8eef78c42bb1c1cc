// The shared-memory Communicator between real forked processes: exact sums, the
// same floats on every rank, chunk boundaries, and a waiting rank that gives up when
// the run stops instead of hanging.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/shm.hpp"
#include "hogwild/error.hpp"

using hogwild::detail::ShmCommunicator;

namespace {

struct Shared {  // an anonymous MAP_SHARED mapping, as a forked group shares the arena
  explicit Shared(std::size_t bytes) : size(bytes) {
    p = static_cast<std::byte*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(p != MAP_FAILED);
  }
  ~Shared() { munmap(p, size); }
  std::byte* p;
  std::size_t size;
};

// Forks `ranks` children running body(rank) (exit status: its return value); returns
// their statuses.
std::vector<int> run_ranks(unsigned ranks, const std::function<int(unsigned)>& body) {
  std::vector<pid_t> pids;
  for (unsigned r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 1;
      try {
        code = body(r);
      } catch (const hogwild::Error& e) {
        code = e.exit_code();
      } catch (...) {
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

}  // namespace

TEST_CASE("three processes all-reduce exact sums, the same floats on every rank") {
  constexpr unsigned kRanks = 3;
  const std::vector<std::size_t> lengths{0, 1, 5, ShmCommunicator::kChunkFloats,
                                         ShmCommunicator::kChunkFloats + 1, 200003};
  std::size_t total = 0;
  for (auto n : lengths) total += n;
  Shared region(ShmCommunicator::region_bytes(kRanks));
  ShmCommunicator::prepare({region.p, region.size}, kRanks);
  Shared results(kRanks * total * sizeof(float));  // each rank's answers, for the parent
  const auto codes = run_ranks(kRanks, [&](unsigned rank) {
    ShmCommunicator comm({region.p, region.size}, rank, kRanks);
    auto* out = reinterpret_cast<float*>(results.p) + rank * total;
    for (int round = 0; round < 3; ++round) {
      std::size_t at = 0;
      for (std::size_t n : lengths) {
        std::vector<float> v(n);
        // Integers (exact in any order) in round 0; fractions after, whose sum
        // depends on the order of the adds: every rank must still get the same.
        for (std::size_t i = 0; i < n; ++i)
          v[i] = round == 0 ? static_cast<float>((i % 97) * (rank + 1))
                            : 0.1f * static_cast<float>(i % 13) / static_cast<float>(rank + round);
        comm.all_reduce_sum(v);
        if (round == 0)
          for (std::size_t i = 0; i < n; ++i)
            if (v[i] != static_cast<float>((i % 97) * 6)) return 10;
        if (round == 2 && n > 0) std::memcpy(out + at, v.data(), n * sizeof(float));
        at += n;
      }
      comm.barrier();
    }
    return 0;
  });
  CHECK(codes == std::vector<int>(kRanks, 0));
  const auto* r = reinterpret_cast<const float*>(results.p);
  CHECK(std::memcmp(r, r + total, total * sizeof(float)) == 0);
  CHECK(std::memcmp(r, r + 2 * total, total * sizeof(float)) == 0);
  // And the fractions were summed: spot-check one against the sum in rank order.
  const std::size_t i = 12;
  float expect = 0;
  for (unsigned k = 0; k < kRanks; ++k) expect += 0.1f * 12.0f / static_cast<float>(k + 2);
  CHECK(r[lengths[0] + lengths[1] + lengths[2] + i] == doctest::Approx(expect));
}

TEST_CASE("a rank waiting for a peer that never comes gives up when the run stops") {
  Shared region(ShmCommunicator::region_bytes(2) + 64);
  ShmCommunicator::prepare({region.p, ShmCommunicator::region_bytes(2)}, 2);
  auto* stop = new (region.p + ShmCommunicator::region_bytes(2)) std::atomic<std::int32_t>(0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 1;
    try {
      ShmCommunicator comm({region.p, ShmCommunicator::region_bytes(2)}, 0, 2, stop);
      comm.barrier();  // rank 1 never arrives
      code = 0;
    } catch (const hogwild::Error& e) {
      code = e.exit_code();
    }
    _exit(code);
  }
  usleep(200000);
  int status = 0;
  CHECK(waitpid(pid, &status, WNOHANG) == 0);  // still waiting, not spinning out
  stop->store(1);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == hogwild::kExitWorkerFailed);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}
