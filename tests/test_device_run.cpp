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
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "comm/gloo.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/device_kernel.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/memory_space.hpp"
#include "hogwild/model_file.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/predictor.hpp"
#include "hogwild/rng.hpp"
#include "memory/device_arena.hpp"
#include "memory/half.hpp"
#include "modes/mode_def.hpp"
#include "ridge.hpp"
#include "support.hpp"
#include "device/device_backend.hpp"
#include "modes/ddp/gradient_sync.hpp"

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
  void read_bytes(void* dst, const void* src, std::size_t bytes) const override {
    std::memcpy(dst, src, bytes);
  }
  void write_bytes(void* dst, const void* src, std::size_t bytes) const override {
    std::memcpy(dst, src, bytes);
  }
};

// Chunks trained by the stand-in's steps, in every process (a shared page made
// before the fork server).
std::atomic<int>& shared_counter(int which) {
  static auto* page = new (mmap(nullptr, 3 * sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0)) std::atomic<int>[3]{};
  return page[which];
}

// ddp: each rank's digest of its weights after its latest step, and its steps.
struct RankDigest {
  std::atomic<std::uint64_t> digest{0}, steps{0};
};
RankDigest& rank_digest(unsigned rank) {
  static auto* page = new (mmap(nullptr, 2 * sizeof(RankDigest), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0)) RankDigest[2]{};
  return page[rank];
}
std::atomic<int>& chunks() { return shared_counter(0); }

// Workers that found the rows in the device arena other than the dataset's.
std::atomic<int>& row_mismatches() { return shared_counter(1); }

// Workers whose steps were handed tensors of halves (--factors fp16).
std::atomic<int>& half_workers() { return shared_counter(2); }

// The CPU's step for each example of a chunk, with the mode's access policy. Under
// ddp: the CPU's captured step (GradientCapture) into a FlatGradient, rank 0 on the
// store's tensors and the others on replicas of their own, as CUDA's ranks on their
// own GPUs. Tensors of halves (--factors fp16; not under ddp here): the coordinates
// a mini-batch touches (Model::touched) are widened into a float copy, stepped
// there, and rounded back to halves, as the GPU's kernel loads, computes in fp32
// and stores.
class HostSteps final : public DeviceSteps {
 public:
  HostSteps(const TrainConfig& cfg, const Model& model, const Dataset& data, const float* targets,
            const ParamSet& params, unsigned rank)
      // The run's model, the worker's own copy (a step keeps scratch in it).
      : model_(const_cast<Model&>(model)), data_(data), targets_(targets), params_(params),
        kind_{mode_def(cfg.mode).access(), static_cast<std::uint8_t>(cfg.optimizer)},
        optimizer_(cfg.optimizer), rank_(rank), batch_(std::max<std::size_t>(cfg.batch, 1)) {
    if (std::any_of(params.tensors().begin(), params.tensors().end(),
                    [](const auto& t) { return t.dtype == Dtype::f16; })) {
      REQUIRE(cfg.mode != Mode::ddp);
      half_workers().fetch_add(1);
      std::vector<ParamSet::Tensor> t;
      for (const auto& a : params.tensors()) {
        ParamSet::Tensor x = a;
        if (a.dtype == Dtype::f16) {
          x.data = widened_.emplace_back(a.size).data();
          x.dtype = Dtype::f32;
        }
        t.push_back(x);
      }
      widened_params_ = ParamSet(std::move(t));
    }
    if (cfg.mode != Mode::ddp) return;
    if (rank > 0) {
      std::vector<ParamSet::Tensor> t;
      for (const auto& a : params.tensors()) {
        ParamSet::Tensor copy{a.name, replica_.emplace_back(a.size, -1.f).data(), a.size};
        if (a.state) copy.state = replica_.emplace_back(a.size, -1.f).data();
        t.push_back(copy);
      }
      params_ = ParamSet(std::move(t));
    }
    flat_ = std::make_unique<FlatGradient>(params_);
  }
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
    for (std::size_t i = 0; i < count; i += batch_) {
      const Batch b{&data_, targets_, rows_.data() + begin + i, std::min(batch_, count - i)};
      if (widened_.empty()) {
        loss += model_.train_batch(kind_, b, params_, lr);
        continue;
      }
      convert_touched(b, /*widen=*/true);
      loss += model_.train_batch(kind_, b, widened_params_, lr);
      convert_touched(b, /*widen=*/false);
    }
    return loss;
  }
  double gradient(std::size_t begin, std::size_t count, float lr) override {
    chunks().fetch_add(1);
    const StepKind captured{access_index<GradientCapture>(), static_cast<std::uint8_t>(optimizer_)};
    return model_.train_batch(captured, Batch{&data_, targets_, rows_.data() + begin, count},
                              flat_->params(), lr);
  }
  std::span<float> gradient_buffer() override { return {flat_->data(), flat_->size()}; }
  void apply(float lr, float scale) override {
    flat_->apply(flat_->data(), 0, flat_->size(), optimizer_, lr, scale);
    std::fill(flat_->data(), flat_->data() + flat_->size(), 0.f);
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the weights' bytes
    for (const auto& w : weights())
      for (std::byte b : w) h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
    rank_digest(rank_).digest.store(h);
    rank_digest(rank_).steps.fetch_add(1);
  }
  std::vector<std::span<std::byte>> weights() override { return weight_spans(params_); }

 private:
  Model& model_;
  const Dataset& data_;
  const float* targets_;
  ParamSet params_;
  StepKind kind_;
  Optimizer optimizer_;
  unsigned rank_;
  std::size_t batch_;  // the MLP's mini-batch (the kernels' example)
  std::vector<std::vector<float>> replica_;
  std::unique_ptr<FlatGradient> flat_;
  // The touched coordinates of every tensor of halves: widened into its float copy,
  // or rounded back into the halves (relaxed 16-bit loads and stores: other worker
  // processes step the same halves meanwhile, THE INTENDED RACE).
  void convert_touched(const Batch& b, bool widen) {
    for (std::size_t t = 0; t < params_.count(); ++t) {
      if (params_[t].dtype != Dtype::f16) continue;
      keys_.clear();
      REQUIRE(model_.touched(t, b, keys_));
      auto* halves = reinterpret_cast<std::uint16_t*>(params_.data(t));
      float* floats = widened_params_.data(t);
      for (std::uint32_t k : keys_) {
        std::atomic_ref<std::uint16_t> h(halves[k]);
        if (widen)
          floats[k] = half_to_float(h.load(std::memory_order_relaxed));
        else
          h.store(float_to_half(floats[k]), std::memory_order_relaxed);
      }
    }
  }

  std::vector<std::uint32_t> rows_;
  unsigned launches_ = 0;
  std::vector<std::vector<float>> widened_;  // the float copies of the tensors of halves
  ParamSet widened_params_;
  std::vector<std::uint32_t> keys_;
};

class HostStandIn final : public DeviceBackend {
 public:
  // Two "GPUs": ddp runs two ranks at most.
  CudaStatus status() const override { return {true, 2, "host stand-in"}; }
  std::shared_ptr<DeviceMemory> memory(CudaIpc) const override { return host_standin_memory(); }
  std::unique_ptr<DeviceSteps> steps(const TrainConfig& cfg, DeviceAccess, const Model& model,
                                     const Dataset& data, const float* targets,
                                     const ParamSet& params, int* lock,
                                     const StoredRows* rows, unsigned rank) const override {
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
    return std::make_unique<HostSteps>(cfg, model, data, targets, params, rank);
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
    rank_digest(0).steps.store(0);
    row_mismatches().store(0);
    half_workers().store(0);
    // A model of the program's own, made by name in the workers.
    register_model("ridge", [](const ModelOptions&) { return std::make_unique<test::Ridge<>>(); });
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

namespace {

// The MF cases' ratings: 300 users, 200 items, a hidden rank of 5.
GeneratedRatings mf_ratings() {
  RatingsGenerateOptions g;
  g.users = 300;
  g.items = 200;
  g.rank = 5;
  g.ratings = 30000;
  g.test_ratings = 3000;
  g.noise = 0.3;
  g.seed = 5;
  return generate_ratings(g);
}

// MF of rank 5 on the CPU, 10 epochs of SGD at 0.02 with a decay.
TrainConfig mf_config(Mode mode, unsigned workers) {
  TrainConfig c = test::sgd_config(mode, workers);
  c.model = "mf";
  c.model_options.rank = 5;
  c.step_size.lr0 = 0.02f;
  c.step_size.decay = 0.95f;
  c.epochs = 10;
  return c;
}

}  // namespace

TEST_CASE("mf trains on the device path as on the CPU") {
  stand_in();
  const auto data = mf_ratings();
  TrainConfig c = mf_config(Mode::hogwild, 2);
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

namespace {

// True when every value is a half (rounding it to the nearest half changes nothing).
bool all_halves(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(),
                     [](float x) { return half_to_float(float_to_half(x)) == x; });
}

}  // namespace

TEST_CASE("mf with --factors fp16 on the device path: the workers step halves, the run learns as "
          "with fp32 factors, and its checkpoint resumes to the same halves") {
  stand_in();
  const auto data = mf_ratings();
  TrainConfig c = mf_config(Mode::hogwild, 2);
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  const TrainResult fp32 = train(c, data.train, &data.test);
  CHECK_FALSE(all_halves(fp32.parameters.at("P")));
  c.model_options.factors = Dtype::f16;
  half_workers().store(0);
  const TrainResult fp16 = train(c, data.train, &data.test);
  MESSAGE("mf, fp16 factors: test rmse " << fp16.test.rmse << " (fp32 factors "
                                         << fp32.test.rmse << ")");
  CHECK(half_workers().load() == 2);
  CHECK(fp16.test.rmse < fp32.test.rmse * 1.02 + 0.005);
  CHECK(fp16.test.rmse < 0.5);  // it learned: the ratings' noise is 0.3, their spread about 1
  // What the device held, and what came back, are halves; the biases are floats.
  CHECK(all_halves(fp16.parameters.at("P")));
  CHECK(all_halves(fp16.parameters.at("Q")));
  CHECK_FALSE(all_halves(fp16.parameters.at("bu")));

  // Its model file holds the factors as F16 (the halves they are) and the biases as
  // F32, and predicts what the run evaluated.
  {
    test::TempDir files;
    TrainConfig saving = c;
    saving.save_model = files.file("mf16.safetensors");
    const TrainResult saved = train(saving, data.train, &data.test);
    const ModelFileHeader h = read_model_header(saving.save_model);
    for (const auto& t : h.tensors) {
      CAPTURE(t.name);
      CHECK(t.dtype == (t.name == "P" || t.name == "Q" ? "F16" : "F32"));
    }
    const auto& P = *std::find_if(h.tensors.begin(), h.tensors.end(), [](auto& t) { return t.name == "P"; });
    CHECK(read_model_tensor(h, P) == saved.parameters.at("P"));
    const Predictor p = load_model(saving.save_model);
    CHECK(p.evaluate(p.prepare(data.test)).rmse == doctest::Approx(saved.test.rmse).epsilon(1e-5));
  }

  // Serial, 4 epochs straight against 2 + a resume of 2: the same halves, bit for bit
  // (the checkpoint holds them widened; the resume rounds them back to themselves).
  test::TempDir dir;
  TrainConfig s = c;
  s.mode = Mode::serial;
  s.workers = 1;
  s.optimizer = Optimizer::adagrad;
  s.epochs = 4;
  const TrainResult whole = train(s, data.train, &data.test);
  s.epochs = 2;
  s.checkpoint = dir.file("mf16.ckpt");
  train(s, data.train, &data.test);
  for (const auto& t : read_checkpoint(s.checkpoint).tensors)
    if (t.name == "param:P" || t.name == "param:Q") CHECK(all_halves(t.values));
  s.epochs = 4;
  s.resume = s.checkpoint;
  const TrainResult resumed = train(s, data.train, &data.test);
  CHECK(resumed.resumed_epochs == 2);
  CHECK(resumed.parameters == whole.parameters);
  CHECK(resumed.optimizer_state == whole.optimizer_state);
  // The factors' storage is part of what a checkpoint was trained with.
  TrainConfig wider = s;
  wider.model_options.factors = Dtype::f32;
  CHECK_THROWS_WITH_AS(train(wider, data.train, &data.test),
                       doctest::Contains("it was written with --factors fp16; this run has "
                                         "--factors fp32"),
                       ConfigError);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("--factors fp16 is the GPU's, and mf's") {
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  c.model_options.factors = Dtype::f16;
  c.model = "mf";
  CHECK_THROWS_WITH_AS(c.validate(),
                       "--factors fp16 stores the factors on the GPU: add --device cuda (the CPU "
                       "trains fp32 factors)",
                       ConfigError);
  ModelOptions o;
  o.factors = Dtype::f16;
  CHECK_THROWS_WITH_AS(make_model("logistic", o),
                       "--factors fp16 applies to --model mf only (model \"logistic\")",
                       ConfigError);
  CHECK_NOTHROW(make_model("mf", o));
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("hogwild_train says where --factors fp16 runs" * doctest::test_suite("cli")) {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  test::write_text(dir.file("r.txt"), "1 1 5\n2 1 3\n1 2 4\n");
  const auto run = [&](const std::vector<std::string>& more) {
    return test::run_train({"--train", dir.file("r.txt"), "--model", "mf"}, more);
  };
  auto r = run({"--factors", "fp16"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("error: --factors fp16 stores the factors on the GPU: add --device cuda") !=
        std::string::npos);
  r = run({"--factors", "fp8", "--device", "cuda"});  // the option's value first, then the GPU
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("error: unknown --factors \"fp8\"; expected fp32 or fp16") != std::string::npos);
  CHECK(run({"--factors", "fp32"}).exit_code == 0);
  CHECK(test::our_shm_entries().empty());
}


namespace {

// c (a multiclass model) on dense class blobs, on the CPU and then on the device
// path: the device path trained chunk by chunk on the rows in the device arena, and
// learned as the CPU did.
void blobs_on_device_as_on_cpu(TrainConfig c) {
  const Dataset train_set = test::class_blobs(3000, 30, 1), test_set = test::class_blobs(600, 30, 2);
  const TrainResult cpu = train(c, train_set, &test_set);
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  chunks().store(0);
  const TrainResult r = train(c, train_set, &test_set);
  MESSAGE(c.model << ": test accuracy " << r.test.accuracy << " (CPU " << cpu.test.accuracy << ")");
  CHECK(chunks().load() == 8 * 2 * 3);  // 1500 rows a worker, chunks of 500
  CHECK(row_mismatches().load() == 0);  // dense floats: the value array
  CHECK(cpu.test.accuracy > 0.8);
  CHECK(r.test.accuracy > cpu.test.accuracy - 0.02);
}

}  // namespace

TEST_CASE("softmax on dense rows trains on the device path as on the CPU") {
  stand_in();
  TrainConfig c = test::sgd_config(Mode::atomic, 2);
  c.model = "softmax";
  c.step_size.lr0 = 0.05f;
  blobs_on_device_as_on_cpu(c);
}

TEST_CASE("the mlp trains on the device path in mini-batches as on the CPU") {
  stand_in();
  TrainConfig c = test::sgd_config(Mode::hogwild, 2);
  c.model = "mlp";
  c.model_options.hidden = {16};
  c.batch = 10;
  c.step_size.lr0 = 0.05f;
  blobs_on_device_as_on_cpu(c);
}

TEST_CASE("ddp on the device path: every rank's replica starts as rank 0's weights and takes the "
          "same steps, and it learns as the CPU's ddp does") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  for (Optimizer opt : {Optimizer::sgd, Optimizer::adagrad}) {
    CAPTURE(static_cast<int>(opt));
    TrainConfig c = test::sgd_config(Mode::ddp, 2);
    c.batch = 8;
    c.optimizer = opt;
    if (opt == Optimizer::adagrad) c.step_size.lr0 = 0.1f;
    const TrainResult cpu = train(c, train_set, &test_set);
    c.device = Device::cuda;
    c.worker_start = WorkerStart::fork_server;
    chunks().store(0);
    for (unsigned r = 0; r < 2; ++r) rank_digest(r).steps.store(0);
    const TrainResult r = train(c, train_set, &test_set);
    MESSAGE("ddp on the device path: test accuracy " << r.test.accuracy << ", loss "
            << r.test.loss << " (CPU ddp " << cpu.test.accuracy << ", " << cpu.test.loss << ")");
    // 8 epochs of 2000 rows a rank in mini-batches of 8: a launch each, and a step.
    CHECK(chunks().load() == 2 * 8 * 250);
    CHECK(rank_digest(0).steps.load() == 8 * 250);
    CHECK(rank_digest(1).steps.load() == 8 * 250);
    // The replicas started as rank 0's weights and took the same steps.
    CHECK(rank_digest(0).digest.load() == rank_digest(1).digest.load());
    CHECK(r.samples == 8 * train_set.rows());
    // The same update as the CPU's ddp, up to the order of the sums.
    CHECK(r.test.accuracy == doctest::Approx(cpu.test.accuracy).epsilon(0.01));
    CHECK(r.test.loss == doctest::Approx(cpu.test.loss).epsilon(0.01));
    CHECK(test::our_shm_entries().empty());
  }
}

TEST_CASE("ddp on the device path: a run resumed from its checkpoint ends with the "
          "uninterrupted run's weights (every rank starts from the restored arena)") {
  stand_in();
  test::TempDir dir;
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  for (Optimizer opt : {Optimizer::sgd, Optimizer::adagrad}) {
    CAPTURE(static_cast<int>(opt));
    TrainConfig c = device_config(Mode::ddp, 2);
    c.batch = 8;
    c.optimizer = opt;
    c.epochs = 4;
    const TrainResult whole = train(c, train_set, &test_set);
    c.epochs = 2;
    c.checkpoint = dir.file("ddp.ckpt");
    train(c, train_set, &test_set);
    c.epochs = 4;
    c.resume = c.checkpoint;
    for (unsigned r = 0; r < 2; ++r) rank_digest(r).steps.store(0);
    const TrainResult resumed = train(c, train_set, &test_set);
    CHECK(resumed.resumed_epochs == 2);
    CHECK(rank_digest(1).steps.load() == 2 * 250);  // only the last two epochs
    CHECK(rank_digest(0).digest.load() == rank_digest(1).digest.load());
    CHECK(resumed.parameters == whole.parameters);  // AdaGrad's accumulators came back too
  }
}

namespace {

// ddp with the stand-in on node k of 2, through the rendezvous store `rendezvous`.
TrainConfig device_ddp_node(unsigned k, const std::string& rendezvous) {
  TrainConfig c = test::sgd_config(Mode::ddp, 2);
  c.batch = 8;
  c.epochs = 3;
  c.device = Device::cuda;
  c.worker_start = WorkerStart::fork_server;
  c.nodes = 2;
  c.node_rank = k;
  c.rendezvous = rendezvous;
  c.max_restarts = 0;
  return c;
}

// A node of its own (its own fork server, as a real node has): trains, then writes
// its final weights w to the file args[2]. args: node rank, rendezvous.
const test::ChildEntry device_ddp_node_entry(
    "device-ddp-node", [](const std::vector<std::string>& args) {
      stand_in();
      auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
      const TrainResult r = train(device_ddp_node(static_cast<unsigned>(std::stoi(args[0])), args[1]),
                                  train_set, &test_set);
      const auto& w = r.parameters.at("w");
      std::ofstream(args[2], std::ios::binary)
          .write(reinterpret_cast<const char*>(w.data()),
                 static_cast<std::streamsize>(w.size() * sizeof(float)));
      return 0;
    });

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace

TEST_CASE("ddp on the device path across two nodes: every rank of both nodes in one group, the "
          "same weights on both, those of the CPU's ddp with all four workers" *
          doctest::test_suite("gloo")) {
  if (!gloo_built()) {
    test::skip("built without Gloo (libgloo-dev, libhiredis-dev): no group across nodes");
    return;
  }
  test::TempDir dir;
  const std::string store = "file:" + dir.file("store");
  std::filesystem::create_directory(dir.file("store"));
  std::vector<pid_t> nodes;
  for (unsigned k = 0; k < 2; ++k)
    nodes.push_back(test::spawn_child(
        "device-ddp-node", {std::to_string(k), store, dir.file(k ? "w1" : "w0")}));
  for (pid_t pid : nodes) CHECK(test::wait_exit(pid, 240) == 0);
  const std::vector<float> w0 = read_floats(dir.file("w0")), w1 = read_floats(dir.file("w1"));
  REQUIRE(!w0.empty());
  CHECK(w0 == w1);
  // One node, the CPU's ddp with all four workers: the same steps up to the order of
  // the sums.
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  TrainConfig one = test::sgd_config(Mode::ddp, 4);
  one.batch = 8;
  one.epochs = 3;
  const TrainResult cpu = train(one, train_set, &test_set);
  const auto& w = cpu.parameters.at("w");
  REQUIRE(w.size() == w0.size());
  double worst = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    worst = std::max(worst, std::fabs(double(w[i]) - w0[i]) / (1 + std::fabs(double(w[i]))));
  MESSAGE("2 nodes x 2 ranks on the device path against the CPU's 1 node x 4: farthest " << worst);
  CHECK(worst < 1e-5);
  CHECK(test::entries_in(dir.file("store")) == 0);  // the runs erased their keys
}

TEST_CASE("--device cuda --mode ddp wants a GPU per rank and NCCL's sums") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(400, 100, 50, 5, 0.05, 7);
  TrainConfig c = device_config(Mode::ddp, 3);  // the stand-in has 2 "GPUs"
  try {
    train(c, train_set, &test_set);
    FAIL("three ranks on two GPUs trained");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("one rank per GPU") != std::string::npos);
    CHECK(std::string(e.what()).find("--workers 2 or fewer") != std::string::npos);
  }
  c.workers = 2;
  c.comm = "gloo";
  CHECK_THROWS_WITH_AS(train(c, train_set, &test_set),
                       doctest::Contains("sums its gradients with NCCL"), ConfigError);
  c = device_config(Mode::hogwild, 2);
  c.batch = 4;
  CHECK_THROWS_WITH_AS(train(c, train_set, &test_set), doctest::Contains("--batch above 1"),
                       ConfigError);
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("--device cuda refuses a mode that states no device access, naming those that do") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(400, 100, 50, 5, 0.05, 7);
  for (Mode m : {Mode::dp, Mode::ps}) {
    CAPTURE(to_string(m));
    TrainConfig c = device_config(m, 2);
    const std::string said = fmt::format("--device cuda runs --mode serial, hogwild, atomic, lock "
                                         "or ddp, not {}", to_string(m));
    CHECK_THROWS_WITH_AS(train(c, train_set, &test_set), doctest::Contains(said.c_str()),
                         ConfigError);
  }
  CHECK(test::our_shm_entries().empty());
}

TEST_CASE("a model of the program's own trains on the device path once it registers a kernel "
          "under its name, and the kernel's check is asked first") {
  stand_in();
  auto [train_set, test_set] = test::generated_problem(4000, 1000, 500, 20, 0.05, 7);
  TrainConfig cpu = test::sgd_config(Mode::hogwild, 2);
  cpu.model = "ridge";
  cpu.step_size.lr0 = 0.02f;
  test::Ridge<> ridge;
  const TrainResult on_cpu = train(cpu, ridge, train_set, &test_set);
  TrainConfig c = device_config(Mode::hogwild, 2);
  c.model = "ridge";
  c.step_size = cpu.step_size;
  // No kernel yet: the models that have one are named, and how to add one.
  CHECK_THROWS_WITH_AS(train(c, ridge, train_set, &test_set),
                       doctest::Contains("--device cuda trains the models hinge, logistic, mf, "
                                         "mlp, softmax, squared, not ridge"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(train(c, ridge, train_set, &test_set),
                       doctest::Contains("register_device_kernel"), ConfigError);
  // The registry outlives the case: its check counts in a static. (Registered after
  // the fork server started, which a program must not do: the stand-in backend's
  // workers never look the kernel up.)
  static std::atomic<int> checked{0};
  register_device_kernel(
      "ridge", {.check = [](const TrainConfig& cfg, const Model& m, DeviceAccess access) {
                  ++checked;
                  CHECK(m.name() == "ridge");
                  CHECK(access == DeviceAccess::hogwild);
                  if (cfg.epochs > 50) throw ConfigError("ridge's kernel: at most 50 epochs");
                },
                // The stand-in backend trains with the CPU's step and never makes it.
                .make = [](const DeviceKernelSetup&) -> std::unique_ptr<DeviceKernel> {
                  throw ConfigError("the stand-in backend makes no kernel");
                }});
  const auto models = device_kernel_models();
  CHECK(std::find(models.begin(), models.end(), "ridge") != models.end());
  TrainConfig long_run = c;
  long_run.epochs = 60;
  CHECK_THROWS_WITH_AS(train(long_run, ridge, train_set, &test_set),
                       "ridge's kernel: at most 50 epochs", ConfigError);
  CHECK(checked.load() == 1);
  chunks().store(0);
  const TrainResult r = train(c, ridge, train_set, &test_set);
  CHECK(checked.load() == 2);
  CHECK(chunks().load() == 64);  // the device path: 8 epochs of 4000 rows in chunks of 500
  CHECK(r.samples == 8 * train_set.rows());
  MESSAGE("ridge test loss: device path " << r.test.loss << ", CPU " << on_cpu.test.loss);
  CHECK(r.test.loss < on_cpu.test.loss * 1.05 + 1e-3);
  CHECK(test::our_shm_entries().empty());
}
