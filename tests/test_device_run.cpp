// The trainer's device path, where no GPU is: a DeviceBackend whose memory is host
// memory standing in for device memory (a memfd, shared by file descriptor as
// CUDA's VMM memory is) and whose steps are the CPU's, one example at a time,
// standing in for a kernel launch. Everything else is what --device cuda runs: the
// device tensor store and its table in the host arena, workers started by the fork
// server with the device arena's descriptor in their description, the chunked
// step loop and its published places, evaluation and the final weights through
// host_access(device), a crashed worker respawned onto the same device arena, and
// a checkpoint written from it and resumed. The kernels themselves are tested on a
// GPU (test_cuda.cpp).
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <atomic>
#include <cstdlib>
#include <new>
#include <cstring>

#include "hogwild/checkpoint.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/memory_space.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/rng.hpp"
#include "memory/device_arena.hpp"
#include "modes/mode_def.hpp"
#include "support.hpp"
#include "trainer/device_backend.hpp"

using namespace hogwild;
using namespace hogwild::detail;

namespace {

// The host reaches the stand-in memory as it reaches its own.
struct PlainAccess final : HostAccess {
  void read(float* dst, const float* src, std::size_t n) const override {
    std::memcpy(dst, src, n * sizeof(float));
  }
  void write(float* dst, const float* src, std::size_t n) const override {
    std::memcpy(dst, src, n * sizeof(float));
  }
};

// Chunks trained by the stand-in's steps, in every process (a shared page made
// before the fork server).
std::atomic<int>& shared_counter(int which) {
  static auto* page = new (mmap(nullptr, 2 * sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0)) std::atomic<int>[2]{};
  return page[which];
}
std::atomic<int>& chunks() { return shared_counter(0); }

// Workers that found the rows in the device arena other than the dataset's.
std::atomic<int>& row_mismatches() { return shared_counter(1); }

// The CPU's step for each example of a chunk, with the mode's access policy.
class HostSteps final : public DeviceSteps {
 public:
  HostSteps(const TrainConfig& cfg, const Model& model, const Dataset& data, const float* targets,
            const ParamSet& params)
      // The run's model, the worker's own copy (a step keeps scratch in it).
      : model_(const_cast<Model&>(model)), data_(data), targets_(targets), params_(params),
        kind_{mode_def(cfg.mode).access(), static_cast<std::uint8_t>(cfg.optimizer)} {}
  std::size_t chunk() const noexcept override { return 500; }
  void begin_epoch(std::span<const std::uint32_t> rows) override {
    rows_.assign(rows.begin(), rows.end());
    ++launches_;
  }
  double train(std::size_t begin, std::size_t count, float lr) override {
    // Armed (0), the first worker to reach its second chunk dies, once.
    int armed = 0;
    if (begin > 0 && test::shared_flag().compare_exchange_strong(armed, 1)) std::abort();
    chunks().fetch_add(1);
    double loss = 0;
    for (std::size_t i = 0; i < count; ++i)
      loss += model_.train_batch(kind_, Batch{&data_, targets_, rows_.data() + begin + i, 1},
                                 params_, lr);
    return loss;
  }

 private:
  Model& model_;
  const Dataset& data_;
  const float* targets_;
  ParamSet params_;
  StepKind kind_;
  std::vector<std::uint32_t> rows_;
  unsigned launches_ = 0;
};

class HostStandIn final : public DeviceBackend {
 public:
  CudaStatus status() const override { return {true, 1, "host stand-in"}; }
  std::shared_ptr<DeviceMemory> memory(CudaIpc) const override { return host_standin_memory(); }
  std::unique_ptr<DeviceSteps> steps(const TrainConfig& cfg, const Model& model,
                                     const Dataset& data, const float* targets,
                                     const ParamSet& params, int* lock,
                                     const StoredRows* rows) const override {
    // The parent uploaded the rows and targets into the device arena once; this
    // worker maps them: they must be the dataset's, array for array.
    const auto same = [](const auto* stored, auto span) {
      return span.empty() ? stored == nullptr
                          : stored && std::memcmp(stored, span.data(), span.size_bytes()) == 0;
    };
    const bool ok = lock && rows && same(rows->offsets, data.offsets()) &&
                    same(rows->index, data.indices()) && same(rows->value, data.values()) &&
                    same(rows->pixels, data.pixels()) &&
                    same(rows->target, std::span<const float>(targets, data.rows()));
    if (!ok) row_mismatches().fetch_add(1);
    return std::make_unique<HostSteps>(cfg, model, data, targets, params);
  }
};

// Registered, and the fork server started, once: before any case trains.
void stand_in() {
  static const bool done = [] {
    static PlainAccess access;
    static HostStandIn backend;
    register_device_access(access);
    register_device_backend(&backend);
    test::shared_flag().store(2);  // disarmed; the pages exist before the server forks
    chunks().store(0);
    row_mismatches().store(0);
    start_fork_server();
    return true;
  }();
  (void)done;
}

TrainConfig device_config(Mode mode, unsigned workers) {
  TrainConfig c = test::sgd_config(mode, workers);
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  return c;
}

}  // namespace

TEST_CASE("a device run trains through the device store and fork-server workers as the CPU "
          "run does, in every mode") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  const TrainResult cpu = train(test::sgd_config(Mode::hogwild, 2), train_set, &test_set);
  for (Mode mode : {Mode::serial, Mode::hogwild, Mode::atomic, Mode::lock}) {
    CAPTURE(to_string(mode));
    chunks().store(0);
    const TrainResult r = train(device_config(mode, 2), train_set, &test_set);
    CHECK(chunks().load() == 64);  // 8 epochs of 4000 rows in chunks of 500: the device path
    CHECK(row_mismatches().load() == 0);
    MESSAGE(to_string(mode) << ": test accuracy " << r.test.accuracy << " (CPU hogwild "
                            << cpu.test.accuracy << ")");
    CHECK(r.samples == 8 * train_set.rows());
    CHECK(r.test.accuracy > cpu.test.accuracy - 0.03);
    // The final weights came back from the device arena, trained.
    REQUIRE(r.parameters.count("w"));
    double norm = 0;
    for (float x : r.parameters.at("w")) norm += std::abs(x);
    CHECK(norm > 1);
    CHECK(r.history.size() == 8);
    CHECK(test::our_shm_entries().empty());
  }
}

TEST_CASE("a device-run worker that crashes is respawned onto the same device arena") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  const TrainResult cpu = train(test::sgd_config(Mode::hogwild, 2), train_set, &test_set);
  test::shared_flag().store(0);  // armed
  const TrainResult r = train(device_config(Mode::hogwild, 2), train_set, &test_set);
  CHECK(test::shared_flag().load() == 1);
  test::shared_flag().store(2);
  CHECK(r.restarts == 1);
  CHECK(r.samples >= 8 * train_set.rows());
  CHECK(r.test.accuracy > cpu.test.accuracy - 0.03);
}

TEST_CASE("a device run's checkpoint holds the device weights and resumes onto a new device "
          "arena") {
  stand_in();
  test::TempDir dir;
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  TrainConfig c = device_config(Mode::hogwild, 2);
  c.epochs = 3;
  c.checkpoint = dir.file("run.ckpt");
  const TrainResult first = train(c, train_set, &test_set);
  const Checkpoint saved = read_checkpoint(c.checkpoint);
  const NamedTensor* w = nullptr;
  for (const auto& t : saved.tensors)
    if (t.name == "param:w") w = &t;
  REQUIRE(w != nullptr);
  CHECK(w->values == first.parameters.at("w"));
  TrainConfig more = c;
  more.epochs = 5;
  more.resume = c.checkpoint;
  const TrainResult resumed = train(more, train_set, &test_set);
  CHECK(resumed.resumed_epochs == 3);
  CHECK(resumed.samples == 5 * train_set.rows());
  CHECK(resumed.test.accuracy >= first.test.accuracy - 0.02);
}

TEST_CASE("mf trains on the device path as on the CPU") {
  stand_in();
  RatingsGenerateOptions g;
  g.users = 300;
  g.items = 200;
  g.rank = 5;
  g.ratings = 30000;
  g.test_ratings = 3000;
  g.noise = 0.3;
  g.seed = 5;
  const auto data = generate_ratings(g);
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  c.model = "mf";
  c.model_options.rank = 5;
  c.step_size.lr0 = 0.02f;
  c.step_size.decay = 0.95f;
  c.epochs = 10;
  const TrainResult cpu = train(c, data.train, &data.test);
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  chunks().store(0);
  const TrainResult r = train(c, data.train, &data.test);
  MESSAGE("mf: test rmse " << r.test.rmse << " (CPU " << cpu.test.rmse << ")");
  CHECK(chunks().load() == 10 * 2 * 30);  // 15000 ratings a worker, chunks of 500
  CHECK(row_mismatches().load() == 0);
  CHECK(r.test.rmse < cpu.test.rmse * 1.05 + 0.01);
}


TEST_CASE("softmax on dense rows trains on the device path as on the CPU") {
  stand_in();
  const Dataset train_set = test::class_blobs(3000, 30, 1), test_set = test::class_blobs(600, 30, 2);
  TrainConfig c = test::sgd_config(Mode::atomic, 2);
  c.model = "softmax";
  c.step_size.lr0 = 0.05f;
  const TrainResult cpu = train(c, train_set, &test_set);
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  chunks().store(0);
  const TrainResult r = train(c, train_set, &test_set);
  MESSAGE("softmax: test accuracy " << r.test.accuracy << " (CPU " << cpu.test.accuracy << ")");
  CHECK(chunks().load() == 8 * 2 * 3);  // 1500 rows a worker, chunks of 500
  CHECK(row_mismatches().load() == 0);  // dense floats: the value array
  CHECK(cpu.test.accuracy > 0.8);
  CHECK(r.test.accuracy > cpu.test.accuracy - 0.02);
}
