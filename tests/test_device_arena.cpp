// The device arena's host-side logic (memory/device_arena.hpp), on host memory
// standing in for device memory (a memfd, shared by file descriptor as the VMM
// API's memory is): the offset table, the descriptor passed over a Unix socket made
// before fork (SCM_RIGHTS), another process mapping the same bytes, an exporter
// that exits while an importer maps, and the memory returning once the last holder
// is gone, even a SIGKILLed one. And the fork guard (memory/cuda_guard.hpp), which
// is host code too. The same cases on a real GPU are in test_cuda.cpp.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "memory/cuda_guard.hpp"
#include "memory/device_arena.hpp"
#include "process.hpp"
#include "support.hpp"

using namespace hogwild;
using namespace hogwild::detail;
using test::fork_child;
using test::SocketPair;

namespace {

// Forks a child that runs fn and _exits with what it returns (1 on an exception).


// What a worker receives: the table as bytes, the descriptor beside it.
void send_arena(int socket, const DeviceArena& a) {
  send_message(socket, &a.table(), sizeof(DeviceArenaTable), {a.handle()});
}
DeviceArena receive_arena(int socket) {
  DeviceArenaTable t;
  const std::vector<int> fds = recv_message(socket, &t, sizeof t);
  REQUIRE(fds.size() == 1);
  DeviceArena a = DeviceArena::attach(host_standin_memory(), t, fds[0]);
  close(fds[0]);  // the arena keeps its own reference
  return a;
}

const std::vector<BlockSpec> kBlocks = {{"param:w", 1000 * 4}, {"state:w", 1000 * 4}, {"param:b", 4}};

// Shmem in /proc/meminfo, in KiB: memfd pages count there.
long shmem_kib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "Shmem:") return value;
  return -1;
}

}  // namespace

TEST_CASE("the table lays blocks out at 256-byte offsets and rounds the size to the granularity") {
  const auto t = DeviceArenaTable::lay_out(kBlocks, 2 << 20);
  CHECK(t.count == 3);
  CHECK(t.find("param:w").offset == 0);
  CHECK(t.find("state:w").offset == 4096);  // 4000 rounded up to 256
  CHECK(t.find("param:b").offset == 8192);
  CHECK(t.find("param:b").bytes == 4);
  CHECK(t.size == (2u << 20));
  CHECK(DeviceArenaTable::lay_out({{"x", (2 << 20) + 1}}, 2 << 20).size == (4u << 20));
  t.check();

  CHECK_THROWS_WITH_AS(t.find("param:v"), "the device arena has no block 'param:v'", Error);
  CHECK_THROWS_WITH_AS(DeviceArenaTable::lay_out({{"a", 4}, {"a", 8}}, 4096),
                       "device arena block 'a' is named twice", ConfigError);
  CHECK_THROWS_AS(DeviceArenaTable::lay_out({{std::string(48, 'n'), 4}}, 4096), ConfigError);
  CHECK_THROWS_AS(DeviceArenaTable::lay_out(std::vector<BlockSpec>(65, {"x", 4}), 4096),
                  ConfigError);
  DeviceArenaTable garbage;
  CHECK_THROWS_WITH_AS(garbage.check(), "the device arena's table is not one this version wrote",
                       Error);
  DeviceArenaTable overrun = t;
  overrun.entries[2].bytes = t.size;
  CHECK_THROWS_AS(overrun.check(), Error);
}

TEST_CASE("a worker maps the arena from the table and a descriptor sent over a socketpair") {
  SocketPair sp;  // made before fork, as the trainer makes it: no name to find
  const pid_t child = fork_child([&] {
    DeviceArena a = receive_arena(sp.fd[1]);
    const float* w = a.array<float>("param:w");
    for (int i = 0; i < 1000; ++i)
      if (w[i] != static_cast<float>(i)) return 10;
    a.array<float>("state:w")[999] = 42;  // the parent must see it
    a.array<float>("param:b")[0] = -1;
    return 0;
  });
  auto arena = DeviceArena::create(host_standin_memory(), kBlocks);
  CHECK(arena.ipc() == "host stand-in");
  CHECK(arena.array<float>("state:w")[999] == 0);  // zero-filled
  float* w = arena.array<float>("param:w");
  for (int i = 0; i < 1000; ++i) w[i] = static_cast<float>(i);
  send_arena(sp.fd[0], arena);
  CHECK(test::wait_exit(child, 30) == 0);
  CHECK(arena.array<float>("state:w")[999] == 42);
  CHECK(arena.array<float>("param:b")[0] == -1);
}

TEST_CASE("the memory outlives an exporter that exits while an importer maps it") {
  SocketPair to_importer;
  const pid_t importer = fork_child([&] {
    DeviceArena a = receive_arena(to_importer.fd[1]);
    char go = 0;  // the exporter has exited when this byte comes
    if (read(to_importer.fd[1], &go, 1) != 1) return 11;
    return a.array<float>("param:b")[0] == 7.5f ? 0 : 12;
  });
  const pid_t exporter = fork_child([&] {
    auto a = DeviceArena::create(host_standin_memory(), kBlocks);
    a.array<float>("param:b")[0] = 7.5f;
    send_arena(to_importer.fd[0], a);
    return 0;
  });
  REQUIRE(test::wait_exit(exporter, 30) == 0);
  const char go = 1;
  REQUIRE(write(to_importer.fd[0], &go, 1) == 1);
  CHECK(test::wait_exit(importer, 30) == 0);
}

TEST_CASE("the memory returns once its last holder is gone, a SIGKILLed importer included") {
  const long before = shmem_kib();
  REQUIRE(before >= 0);
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  SocketPair sp;
  const pid_t importer = fork_child([&] {
    DeviceArena a = receive_arena(sp.fd[1]);
    volatile std::byte* p = a.block("big");
    for (std::size_t i = 0; i < kBytes; i += 4096) p[i] = std::byte{1};  // every page
    const char done = 1;
    if (write(sp.fd[1], &done, 1) != 1) return 13;
    pause();  // until SIGKILL
    return 0;
  });
  {
    auto arena = DeviceArena::create(host_standin_memory(), {{"big", kBytes}});
    send_arena(sp.fd[0], arena);
    char done = 0;
    REQUIRE(read(sp.fd[0], &done, 1) == 1);
    CHECK(shmem_kib() - before > 200 * 1024);  // the pages exist
  }  // the creator's mapping and descriptor go; the importer still maps it
  CHECK(shmem_kib() - before > 200 * 1024);
  kill(importer, SIGKILL);
  CHECK(test::wait_exit(importer, 30) == -SIGKILL);
  CHECK(shmem_kib() - before < 100 * 1024);  // back, give or take other processes
}

TEST_CASE("a process forked after CUDA was initialised is refused CUDA, with a message") {
  SocketPair sp;
  // A stand-in for a supervisor that initialised CUDA: what note_cuda_initialised
  // records is all the guard reads. The noting happens in a child, so that this
  // test process stays one that never touched CUDA.
  const pid_t supervisor = fork_child([&] {
    note_cuda_initialised();
    check_cuda_usable("evaluation");  // the initialising process itself may
    const pid_t worker = fork_child([&] {
      try {
        check_cuda_usable("mapping the device arena");
      } catch (const ConfigError& e) {
        const std::string m = e.what();
        if (m.find("mapping the device arena: this process") == std::string::npos) return 20;
        if (m.find("was forked from process " + std::to_string(getppid())) == std::string::npos)
          return 21;
        if (m.find("fork server") == std::string::npos) return 22;
        if (!cuda_built()) return 0;  // a build without CUDA code has no entry to guard
        try {
          cuda_status();  // every CUDA entry asks the guard first
        } catch (const ConfigError&) {
          return 0;
        }
        return 23;
      }
      return 24;
    });
    return test::wait_exit(worker, 30);
  });
  CHECK(test::wait_exit(supervisor, 30) == 0);
  CHECK(cuda_initialised_by() == 0);
  check_cuda_usable("this test");  // never initialised here: allowed
}

TEST_CASE("device and IPC names parse, and nothing else does") {
  CHECK(parse_device("cpu") == Device::cpu);
  CHECK(parse_device("cuda") == Device::cuda);
  CHECK_THROWS_WITH_AS(parse_device("gpu"), "--device must be cpu or cuda, not 'gpu'", ConfigError);
  CHECK(parse_cuda_ipc("vmm") == CudaIpc::vmm);
  CHECK(parse_cuda_ipc("legacy") == CudaIpc::legacy);
  CHECK_THROWS_AS(parse_cuda_ipc("fd"), ConfigError);
  CHECK(std::string(to_string(CudaIpc::legacy)) == "legacy");
}
