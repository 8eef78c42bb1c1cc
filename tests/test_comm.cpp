// The shared-memory Communicator between real forked processes: the suite every
// backend passes (comm_suite.hpp), plus what only this backend has: the run's stop
// flag ends a wait, and ranks that outnumber the cores still make progress.
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <vector>

#include "comm/shm.hpp"
#include "comm_suite.hpp"

using hogwild::detail::ShmCommunicator;

namespace {

// The regions live in a mapping made before the ranks fork, as the arena's are.
struct ShmGroups {
  std::unique_ptr<comm_test::Shared> map;
  unsigned size = 0;
};
ShmGroups groups;

comm_test::CommBackend shm() {
  return {
      "shm",
      [](unsigned size, unsigned tags) {
        groups.size = size;
        groups.map = std::make_unique<comm_test::Shared>(tags * ShmCommunicator::region_bytes(size));
        for (unsigned t = 0; t < tags; ++t)
          ShmCommunicator::prepare({groups.map->p + t * ShmCommunicator::region_bytes(size),
                                    ShmCommunicator::region_bytes(size)},
                                   size);
      },
      [](unsigned rank, unsigned size, unsigned tag, comm_test::Millis timeout) {
        const std::size_t bytes = ShmCommunicator::region_bytes(size);
        return std::make_unique<ShmCommunicator>(
            std::span<std::byte>(groups.map->p + tag * bytes, bytes), rank, size, timeout);
      },
      [] { groups.map.reset(); },
  };
}

}  // namespace

HOGWILD_COMM_SUITE("shm", shm())

TEST_CASE("shm: a rank waiting for a peer that never comes gives up when the run stops") {
  const std::size_t bytes = ShmCommunicator::region_bytes(2);
  comm_test::Shared region(bytes + 64);
  ShmCommunicator::prepare({region.p, bytes}, 2);
  auto* stop = new (region.p + bytes) std::atomic<std::int32_t>(0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 1;
    try {
      ShmCommunicator comm({region.p, bytes}, 0, 2, std::chrono::seconds(60), stop);
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

TEST_CASE("shm: eight ranks on two cores finish 2000 small all-reduces") {
  // Spinning ranks that outnumber the cores would take a scheduler slice each per
  // barrier; the futex sleep keeps this to seconds.
  const auto t0 = std::chrono::steady_clock::now();
  const auto codes = comm_test::run_group(shm(), 8, comm_test::Millis(30000),
                                          [](hogwild::Communicator& c) {
    std::vector<float> v(64);
    for (int i = 0; i < 2000; ++i) {
      std::fill(v.begin(), v.end(), 1.0f);
      c.all_reduce(std::span<float>(v));
      if (v[0] != 8.0f) return 20;
    }
    return 0;
  });
  CHECK(codes == std::vector<int>(8, 0));
  MESSAGE("8 ranks, 2000 all-reduces: "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
}
