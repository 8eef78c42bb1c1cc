// Memory spaces (include/hogwild/memory_space.hpp): the host reaches parameter
// memory outside a step only through host_access(space). There is no GPU here, so
// the device space is stood in for by a HostAccess over host arrays that counts
// what passes through it: what this file checks is that snapshots, range copies,
// initialisation and the divergence scan take that path, floats and all.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hogwild/error.hpp"
#include "memory/param_snapshot.hpp"
#include "trainer/run.hpp"
#include "memory/device_arena.hpp"
#include "memory/half.hpp"
#include "process.hpp"
#include "support.hpp"
#include "device/device_steps.hpp"
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
  mutable std::size_t read_bytes_count = 0, written_bytes_count = 0;
  void read_bytes(void* dst, const void* src, std::size_t bytes) const override {
    std::memcpy(dst, src, bytes);
    read_bytes_count += bytes;
  }
  void write_bytes(void* dst, const void* src, std::size_t bytes) const override {
    std::memcpy(dst, src, bytes);
    written_bytes_count += bytes;
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

TEST_CASE("tensors of halves (--factors fp16): 2 bytes a value in the device store, rounded when "
          "written, widened exactly when read; the CPU's store refuses them") {
  register_device_access(device());
  CountingAccess& access = device();
  const auto memory = [] { return std::shared_ptr(detail::host_standin_memory()); };
  std::vector<TensorSpec> specs{{"P", 1000, {Init::normal, 0.1f}, Dtype::f16},
                                {"bu", 10, {}, Dtype::f32}};
  auto store = detail::make_tensor_store(MemorySpace::device, memory);
  Arena arena = Arena::create(store->arena_blocks(specs, true, 0));
  const ParamSet p = store->open(arena, specs, true);
  CHECK(p[0].dtype == Dtype::f16);
  CHECK(p[1].dtype == Dtype::f32);
  // The table says what the device holds: 2 bytes a half, AdaGrad's state in floats.
  const auto& table = arena.object<detail::DeviceArenaTable>("device:table");
  CHECK(table.find(detail::param_block("P")).bytes == 2000);
  CHECK(table.find(detail::state_block("P")).bytes == 4000);
  CHECK(table.find(detail::param_block("bu")).bytes == 40);
  // What ddp's ranks broadcast: the halves' bytes, then the state's floats.
  const auto spans = detail::weight_spans(p);
  REQUIRE(spans.size() == 4);
  CHECK(spans[0].size() == 2000);
  CHECK(spans[1].size() == 4000);
  CHECK(spans[2].size() == 40);

  // Initialisation draws what it draws for floats, and stores the nearest halves.
  access.written_bytes_count = access.written_floats = 0;
  detail::initialise(p, specs, 42);
  CHECK(access.written_bytes_count == 2000);
  CHECK(access.written_floats == 10);
  std::vector<float> drawn(1000);
  {
    std::vector<TensorSpec> as_floats = specs;
    as_floats[0].dtype = Dtype::f32;
    Tensors host({1000, 10}, MemorySpace::host_private);
    detail::initialise(host.set, as_floats, 42);
    drawn = host.store[0];
  }
  const auto* halves = reinterpret_cast<const std::uint16_t*>(p.data(0));
  for (std::size_t i = 0; i < 1000; ++i) REQUIRE(halves[i] == detail::float_to_half(drawn[i]));

  // A snapshot (evaluation, the divergence scan) widens them: exactly the halves.
  access.read_bytes_count = 0;
  ParamSnapshot snap(p);
  CHECK(access.read_bytes_count == 2000);
  CHECK(snap.params()[0].dtype == Dtype::f32);
  for (std::size_t i = 0; i < 1000; ++i)
    REQUIRE(snap.params().data(0)[i] == detail::half_to_float(halves[i]));
  const float changed[2] = {0.5f, -0.25f};
  write_values(MemorySpace::device, Dtype::f16, p.data(0), 104, changed, 2);
  snap.refresh(p, {{{100, 105}}, {}});  // [100, 105) only: 105 keeps its old value
  CHECK(snap.params().data(0)[104] == 0.5f);
  CHECK(snap.params().data(0)[105] == detail::half_to_float(detail::float_to_half(drawn[105])));
  std::vector<float> some(5);
  read_values(MemorySpace::device, Dtype::f16, p.data(0), 995, 5, some.data());
  CHECK(some[4] == detail::half_to_float(halves[999]));

  // Writes round to the nearest half; more than one chunk's worth goes through.
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i) + 1e-5f;
  write_values(MemorySpace::device, Dtype::f16, p.data(0), 0, values.data(), values.size());
  std::vector<float> back(1000);
  read_values(MemorySpace::device, Dtype::f16, p.data(0), 0, back.size(), back.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    REQUIRE(back[i] == detail::half_to_float(detail::float_to_half(values[i])));
    REQUIRE(std::abs(back[i] - values[i]) <= std::abs(values[i]) / 2048 + 1e-7f);
  }
  std::vector<float> big(10000, 3.0f);  // past read_values' and write_values' 4096-half chunks
  std::vector<std::uint16_t> room(10000);
  write_values(MemorySpace::host_private, Dtype::f16, room.data(), 0, big.data(), big.size());
  CHECK(room[9999] == 0x4200);
  std::vector<float> wide(10000);
  read_values(MemorySpace::host_private, Dtype::f16, room.data(), 0, wide.size(), wide.data());
  CHECK(wide == big);

  // The CPU's store: its steps, replicas and servers are fp32.
  auto cpu = detail::make_tensor_store(MemorySpace::host_shared);
  Arena cpu_arena = Arena::create(cpu->arena_blocks(specs, false, 0));
  CHECK_THROWS_WITH_AS(cpu->open(cpu_arena, specs, false),
                       "tensor \"P\" is fp16: the CPU trains fp32 tensors (--factors fp16 needs "
                       "--device cuda)",
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_dtype("--factors", "fp8"),
                       "unknown --factors \"fp8\"; expected fp32 or fp16", ConfigError);
  CHECK(parse_dtype("--factors", "fp16") == Dtype::f16);
}
