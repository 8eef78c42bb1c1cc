// Memory spaces (include/hogwild/memory_space.hpp): the host reaches parameter
// memory outside a step only through host_access(space). There is no GPU here, so
// the device space is stood in for by a HostAccess over host arrays that counts
// what passes through it: what this file checks is that snapshots, range copies,
// initialisation and the divergence scan take that path, floats and all.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hogwild/error.hpp"
#include "hogwild/param_snapshot.hpp"
#include "trainer/run.hpp"
#include "memory/device_arena.hpp"
#include "process.hpp"
#include "support.hpp"
#include "trainer/tensor_store.hpp"

using namespace hogwild;

namespace {

// A device stand-in: memcpy, counting floats each way.
struct CountingAccess final : HostAccess {
  mutable std::size_t read_floats = 0, written_floats = 0;
  void read(float* dst, const float* src, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
    read_floats += n;
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
    written_floats += n;
  }
};

CountingAccess& device() {
  static CountingAccess access;
  return access;
}

struct Tensors {
  std::vector<std::vector<float>> store;
  ParamSet set;
  Tensors(std::vector<std::size_t> sizes, MemorySpace space) {  // at most two
    std::vector<ParamSet::Tensor> t;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto& v = store.emplace_back(sizes[i]);
      for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(i * 1000 + j);
      ParamSet::Tensor x{i == 0 ? "t0" : "t1", v.data(), v.size()};
      x.space = space;
      t.push_back(std::move(x));
    }
    set = ParamSet(std::move(t));
  }
};

}  // namespace

// doctest runs a file's cases in line order: this one before any registration.
TEST_CASE("without device support, device memory is a clear configuration error") {
  CHECK_THROWS_WITH_AS(host_access(MemorySpace::device), doctest::Contains("device support"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(detail::make_tensor_store(MemorySpace::device),
                       doctest::Contains("need a device memory"), ConfigError);
  Tensors d({4}, MemorySpace::device);
  CHECK_THROWS_AS(ParamSnapshot(d.set), ConfigError);
}

TEST_CASE("host spaces copy exactly; the shared arena's store marks its tensors shared") {
  const std::vector<float> src{1.5f, -2.f, 3.25f, std::numeric_limits<float>::denorm_min()};
  for (MemorySpace s : {MemorySpace::host_private, MemorySpace::host_shared}) {
    std::vector<float> dst(src.size()), back(src.size());
    host_access(s).read(dst.data(), src.data(), src.size());
    host_access(s).write(back.data(), dst.data(), dst.size());
    CHECK(back == src);
  }
  const std::vector<TensorSpec> specs{{"w", 10, {}}, {"b", 1, {}}};
  auto store = detail::make_tensor_store(MemorySpace::host_shared);
  CHECK(store->space() == MemorySpace::host_shared);
  Arena arena = Arena::create(store->arena_blocks(specs, true, 0));
  const ParamSet p = store->open(arena, specs, true);
  REQUIRE(p.count() == 2);
  CHECK(p.space() == MemorySpace::host_shared);
  CHECK(p[0].state != nullptr);
  CHECK(p[1].size == 1);
  CHECK(arena.has(detail::param_block("w")));
  CHECK(arena.has(detail::state_block("b")));
}

TEST_CASE("snapshots, range copies, initialisation and the divergence scan go through "
          "the space's host access") {
  register_device_access(device());
  CountingAccess& access = device();
  Tensors d({100, 7}, MemorySpace::device);
  CHECK_FALSE(d.set.on_host());

  access.read_floats = 0;
  ParamSnapshot snap(d.set);
  CHECK(access.read_floats == 107);
  CHECK(snap.params().on_host());
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t i = 0; i < d.set.size(t); ++i)
      CHECK(snap.params().data(t)[i] == d.store[t][i]);

  d.store[0][10] = -1;
  d.store[0][50] = -2;
  d.store[1][3] = -3;
  access.read_floats = 0;
  snap.refresh(d.set, {{{10, 20}}, {}});  // tensor 0: [10, 20); tensor 1: all of it
  CHECK(access.read_floats == 10 + 7);
  CHECK(snap.params().data(0)[10] == -1);
  CHECK(snap.params().data(0)[50] == 50);  // outside the range: not copied
  CHECK(snap.params().data(1)[3] == -3);

  const std::vector<TensorSpec> specs{{"t0", 100, {Init::normal, 0.5f}}, {"t1", 7, {Init::uniform, 2}}};
  Tensors host({100, 7}, MemorySpace::host_private);
  access.written_floats = 0;
  detail::initialise(d.set, specs, 42);
  detail::initialise(host.set, specs, 42);
  CHECK(access.written_floats == 107);
  CHECK(d.store == host.store);
  CHECK(d.store[0][0] != 0);

  CHECK_FALSE(detail::find_non_finite(d.set));
  d.store[1][5] = std::nanf("");
  access.read_floats = 0;
  const auto bad = detail::find_non_finite(d.set);
  CHECK(access.read_floats == 107);
  REQUIRE(bad);
  CHECK(*bad == "t1[5] = nan");
}

TEST_CASE("the device store keeps tensors in a device arena whose table and descriptor a "
          "worker maps") {
  register_device_access(device());
  // The memfd stand-in for device memory (memory/device_arena.hpp).
  const auto memory = [] { return std::shared_ptr(detail::host_standin_memory()); };
  const std::vector<TensorSpec> specs{{"w", 1000, {}}, {"b", 1, {}}};
  auto store = detail::make_tensor_store(MemorySpace::device, memory);
  CHECK(store->space() == MemorySpace::device);
  const auto blocks = store->arena_blocks(specs, true, 0);
  REQUIRE(blocks.size() == 1);  // only the table: the tensors are in device memory
  Arena arena = Arena::create(blocks);
  const ParamSet p = store->open(arena, specs, true);
  REQUIRE(p.count() == 2);
  CHECK(p.space() == MemorySpace::device);
  CHECK(p[0].state != nullptr);
  CHECK(store->handle() >= 0);
  REQUIRE(store->device_lock() != nullptr);
  CHECK(*store->device_lock() == 0);
  detail::initialise(p, {{"w", 1000, {Init::uniform, 1}}, {"b", 1, {}}}, 7);
  const float w7 = p.data(0)[7];
  CHECK(w7 != 0);

  // A worker started from a description: the host arena's table and the
  // descriptor, over a socket made before fork.
  test::SocketPair sp;
  const pid_t worker = test::fork_child([&] {
    std::vector<int> fds;
    char go = 0;
    fds = detail::recv_message(sp.fd[1], &go, 1);
    if (fds.size() != 1) return 10;
    auto mine = detail::make_tensor_store(MemorySpace::device, memory);
    const ParamSet q = mine->open(arena, specs, true, /*attach=*/true, fds[0]);
    if (q.data(0)[7] != w7 || q[0].state[999] != 0) return 11;
    q.data(1)[0] = 2.5f;  // the parent must see it
    return 0;
  });
  detail::send_message(sp.fd[0], "x", 1, {store->handle()});
  CHECK(test::wait_exit(worker, 30) == 0);
  CHECK(p.data(1)[0] == 2.5f);
}
