// The GPU section of the bench (docs/GPU.md): on one CUDA device,
//   - the yardstick: a copy kernel's bandwidth (bytes read + written per second);
//   - the sparse linear kernel (logistic) on RCV1-like rows and the MF kernel on
//     Netflix-like ratings (fp32 and fp16 factors): updates per second, and the bytes
//     each update moves per second as a fraction of the yardstick; the sparse kernel
//     also in the other modes, and with its rows in the device arena (uploaded once,
//     shared by every worker) against a worker's own copy;
//   - 10,000 hand-offs of a tensor between two processes through the device arena
//     (VMM and legacy), each checked by a checksum;
//   - what a CUDA context costs a process in device memory.
// Prints a line per figure and, with --json FILE, writes them all there.
// Without a CUDA device it prints why and exits 77 (skipped).
//
//   build/bench/bench_gpu [--rows 200000] [--json out.json]
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "cuda/kernels.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/memory_space.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/models/mf.hpp"
#include "memory/device_arena.hpp"
#include "process.hpp"
#include "device/device_steps.hpp"
#include "modes/mode_def.hpp"
#include "trainer/run.hpp"
#include "trainer/tensor_store.hpp"

using namespace hogwild;
using namespace hogwild::detail;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs fn in a child (CUDA may run there: this process has not touched it yet);
// what it writes to the pipe comes back as text.
std::string in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (pipe(p) != 0) throw ResourceError("pipe");
  std::fflush(nullptr);  // nothing buffered here is printed again by the child
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("error: ") + e.what();
    }
    (void)!write(p[1], out.data(), out.size());
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

std::uint64_t checksum(const std::vector<float>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (float x : v) {
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

// 10,000 hand-offs of a 1 MiB tensor between two processes: each writes round k's
// values, sends its checksum over the socket, the other reads the tensor, checks
// it and writes round k + 1. Returns "hand-offs/s mismatches".
nlohmann::json hand_offs(CudaIpc ipc, int rounds) {
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) throw ResourceError("socketpair");
  constexpr std::size_t n = 1 << 18;
  auto player = [&](int fd, bool first) -> std::string {
    std::optional<DeviceArena> a;
    if (first) {
      a = DeviceArena::create(cuda_device_memory(ipc), {{"t", n * 4}});
      send_message(fd, &a->table(), sizeof(DeviceArenaTable),
                   a->handle() >= 0 ? std::vector<int>{a->handle()} : std::vector<int>{});
    } else {
      DeviceArenaTable t;
      auto fds = recv_message(fd, &t, sizeof t);
      a = DeviceArena::attach(cuda_device_memory(ipc), t, fds.empty() ? -1 : fds[0]);
      for (int f : fds) close(f);
    }
    float* d = a->array<float>("t");
    std::vector<float> v(n);
    int bad = 0;
    const auto t0 = Clock::now();
    for (int k = first ? 0 : 1; k < rounds; k += 2) {
      if (k > 0) {  // the other's round k - 1
        std::uint64_t want = 0;
        if (read(fd, &want, 8) != 8) return "error: the other process went away";
        host_access(MemorySpace::device).read(v.data(), d, n);
        bad += checksum(v) != want;
      }
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 31 + k) % 1000);
      host_access(MemorySpace::device).write(d, v.data(), n);
      const std::uint64_t sum = checksum(v);
      if (write(fd, &sum, 8) != 8) return "error: the other process went away";
    }
    if (!first) {  // the last round's reply, so that the exporter outlives every use
      const char done = 1;
      (void)!write(fd, &done, 1);
    } else {
      std::uint64_t last = 0;
      (void)!read(fd, &last, 8);
      char done = 0;
      (void)!read(fd, &done, 1);
    }
    return fmt::format("{} {}", rounds / seconds_since(t0), bad);
  };
  std::string other;
  const pid_t pid = fork();
  if (pid == 0) {
    close(sp[0]);
    try {
      player(sp[1], false);
    } catch (...) {  // the exporter then reads "the other process went away"
    }
    _exit(0);
  }
  close(sp[1]);
  const std::string mine = player(sp[0], true);
  close(sp[0]);
  waitpid(pid, nullptr, 0);
  if (mine.rfind("error", 0) == 0) return {{"error", mine}};
  double rate = 0;
  int bad = 0;
  std::sscanf(mine.c_str(), "%lf %d", &rate, &bad);
  return {{"ipc", to_string(ipc)}, {"rounds", rounds}, {"hand_offs_per_s", rate},
          {"checksum_mismatches", bad}};
}

// Device free memory with one process's context and with a second's beside it.
nlohmann::json context_memory() {
  int go[2], back[2];
  if (pipe(go) != 0 || pipe(back) != 0) throw ResourceError("pipe");
  const pid_t first = fork();
  if (first == 0) {
    close(go[1]);
    close(back[0]);
    try {
      cuda_init("context memory");
      const std::size_t f = device_free_bytes();
      (void)!write(back[1], &f, sizeof f);
      char c;
      (void)!read(go[0], &c, 1);  // holds its context until told
    } catch (...) {  // the parent reads nothing and says so
    }
    _exit(0);
  }
  close(go[0]);
  close(back[1]);
  std::size_t one = 0;
  if (read(back[0], &one, sizeof one) != sizeof one) {
    close(go[1]);
    close(back[0]);
    waitpid(first, nullptr, 0);
    return {{"error", "the first process found no device memory"}};
  }
  const std::string two = in_child([] {
    cuda_init("context memory");
    return std::to_string(device_free_bytes());
  });
  (void)!write(go[1], "x", 1);
  close(go[1]);
  close(back[0]);
  waitpid(first, nullptr, 0);
  if (two.rfind("error", 0) == 0) return {{"error", two}};
  const double mib = (static_cast<double>(one) - std::stod(two)) / 1048576.0;
  return {{"context_mib", mib}};
}

struct KernelFigure {
  double updates_per_s = 0, bytes_per_update = 0;
  double mean_loss = 0;  // the timed epoch's, each example's loss before its update
};

// One epoch (after one to warm up) of `model` over `data` in this process, in `mode`.
// shared_rows: the rows in the device arena beside the tensors, as the trainer
// uploads them once for every worker (VMM memory); otherwise the worker's own copy
// (cudaMalloc), as each worker uploading its partition would have it.
KernelFigure time_kernel(const std::string& model_name, ModelOptions options, const Dataset& data,
                         double bytes_per_row, Mode mode = Mode::hogwild,
                         bool shared_rows = false, unsigned warps = 0, float lr = 0.01f,
                         int epochs = 1) {
  auto model = make_model(model_name, options);
  const LabelMap labels = LabelMap::fit(model->label_kind(), data, model->name());
  const std::vector<float> targets = labels.targets(data);
  model->configure(make_problem(data, nullptr, labels));
  const auto specs = model->parameters();
  auto store = make_tensor_store(
      MemorySpace::device, [] { return std::shared_ptr(cuda_device_memory(CudaIpc::vmm)); },
      shared_rows ? &data : nullptr, shared_rows ? targets.data() : nullptr);
  Arena arena = Arena::create(store->arena_blocks(specs, false, 0));
  const ParamSet params = store->open(arena, specs, false);
  initialise(params, specs, 1);
  TrainConfig cfg;
  cfg.model = model_name;
  cfg.mode = mode;
  cfg.model_options = options;
  // 0: every warp the device holds resident (the kernel's throughput); lock and
  // serial run one warp a process, as the trainer runs them.
  cfg.device_warps = mode == Mode::lock || mode == Mode::serial ? 1 : warps;
  auto steps = make_device_steps(cfg, *device_access(mode), *model, data, targets.data(), params, store->device_lock(),
                                 store->rows());
  std::vector<std::uint32_t> order(data.rows());
  std::iota(order.begin(), order.end(), 0u);
  steps->begin_epoch(order);
  for (int e = 0; e < epochs; ++e)  // the first to warm up
    for (std::size_t b = 0; b < order.size(); b += steps->chunk())
      steps->train(b, std::min(steps->chunk(), order.size() - b), lr);
  double loss = 0;
  const auto t0 = Clock::now();
  for (std::size_t b = 0; b < order.size(); b += steps->chunk())
    loss += steps->train(b, std::min(steps->chunk(), order.size() - b), lr);
  const double s = seconds_since(t0);
  return {static_cast<double>(order.size()) / s, bytes_per_row,
          loss / static_cast<double>(order.size())};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The GPU bench: bandwidth yardstick, kernels, IPC hand-offs, context memory"};
  std::size_t rows = 200000, ratings = 5000000;
  int rounds = 10000;
  std::string json_path;
  app.add_option("--rows", rows, "RCV1-like rows for the sparse kernel")->capture_default_str();
  app.add_option("--ratings", ratings, "Netflix-like ratings for the MF kernel")->capture_default_str();
  app.add_option("--hand-offs", rounds, "Hand-offs between two processes")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures to FILE");
  CLI11_PARSE(app, argc, argv);
  try {
    // First the measurements that fork: this process has not touched CUDA yet.
    const std::string probe = in_child([] {
      const CudaStatus s = cuda_status();
      return (s.ok ? "ok " : "no ") + s.message;
    });
    if (probe.rfind("ok ", 0) != 0) {
      fmt::print("SKIP: no CUDA device: {}\n", probe.substr(3));
      return 77;
    }
    nlohmann::json out{{"device", probe.substr(3)}};
    fmt::print("device: {}\n", probe.substr(3));
    for (CudaIpc ipc : {CudaIpc::vmm, CudaIpc::legacy}) {
      // In a child of its own: its first player initialises CUDA there, not here.
      const std::string text = in_child([&] { return hand_offs(ipc, rounds).dump(); });
      const auto h = text.rfind("error", 0) == 0 ? nlohmann::json{{"error", text}}
                                                 : nlohmann::json::parse(text);
      fmt::print("hand-offs ({}): {}\n", to_string(ipc), h.dump());
      out["hand_offs"].push_back(h);
    }
    out["context"] = context_memory();
    if (out["context"].contains("context_mib"))
      fmt::print("context memory: {:.0f} MiB a process\n",
                 out["context"]["context_mib"].get<double>());
    else
      fmt::print("context memory: {}\n", out["context"].dump());
    std::fflush(stdout);

    cuda_init("the bench");
    {  // the yardstick: 1 GiB copied
      constexpr std::size_t n = std::size_t{1} << 28;
      auto arena = DeviceArena::create(cuda_device_memory(CudaIpc::vmm), {{"a", n * 4}, {"b", n * 4}});
      float* a = arena.array<float>("a");
      float* b = arena.array<float>("b");
      launch_copy(b, a, n, nullptr);
      device_synchronize();
      const auto t0 = Clock::now();
      for (int i = 0; i < 10; ++i) launch_copy(b, a, n, nullptr);
      device_synchronize();
      const double gbs = 10 * 2.0 * n * 4 / seconds_since(t0) / 1e9;
      out["copy_gb_per_s"] = gbs;
      fmt::print("yardstick: copy kernel {:.0f} GB/s (read + write)\n", gbs);
    }
    const double yard = out["copy_gb_per_s"].get<double>() * 1e9;
    {  // sparse logistic regression, RCV1-like: 47k features, 75 non-zeros a row
      GenerateOptions g;
      g.rows = rows;
      g.features = 47236;
      g.nnz_per_row = 75;
      const Dataset d = generate_sparse(g);
      // index + value + the weight read and written, per non-zero; offsets, order, target.
      const double bytes = 75 * 16.0 + 8 + 4 + 4;
      const auto k = time_kernel("logistic", {}, d, bytes);
      out["sparse_lr"] = {{"updates_per_s", k.updates_per_s},
                          {"bytes_per_update", bytes},
                          {"fraction_of_copy", k.updates_per_s * bytes / yard}};
      fmt::print("sparse LR (hogwild): {:.3g} updates/s, {:.0f}% of the copy kernel's bytes/s\n",
                 k.updates_per_s, 100 * k.updates_per_s * bytes / yard);
      // The rows where the trainer keeps them (the device arena, uploaded once for
      // every worker) against each worker's own upload; and the other modes.
      const auto shared = time_kernel("logistic", {}, d, bytes, Mode::hogwild, true);
      out["sparse_lr"]["shared_rows_updates_per_s"] = shared.updates_per_s;
      fmt::print("sparse LR (hogwild), rows in the device arena: {:.3g} updates/s ({:.2f}x the "
                 "worker's own copy)\n", shared.updates_per_s, shared.updates_per_s / k.updates_per_s);
      // The concurrency: warps a process (each a Hogwild! worker), up to the resident.
      for (unsigned w : {16u, 64u, 256u, 1024u, 4096u}) {
        const auto kw = time_kernel("logistic", {}, d, bytes, Mode::hogwild, false, w);
        out["sparse_lr"]["warps"][std::to_string(w)] = kw.updates_per_s;
        fmt::print("sparse LR (hogwild), {} warps: {:.3g} updates/s ({:.3f}x every resident warp)\n",
                   w, kw.updates_per_s, kw.updates_per_s / k.updates_per_s);
      }
      // Hogwild's stores: the value read for the margin, stepped (the default), against
      // each weight read again before its store. Interleaved, 3 repetitions each:
      // updates/s with every resident warp, and at lr 0.5 the mean training loss of
      // the 4th epoch (each example's loss before its update), the price in lost
      // updates if any.
      for (int rep = 0; rep < 3; ++rep)
        for (bool reread : {false, true}) {
          set_hogwild_reread(reread);
          const auto kr = time_kernel("logistic", {}, d, bytes);
          const auto kl = time_kernel("logistic", {}, d, bytes, Mode::hogwild, false, 0, 0.5f, 3);
          const std::string key = reread ? "reread" : "once";
          out["sparse_lr"][key]["updates_per_s"].push_back(kr.updates_per_s);
          out["sparse_lr"][key]["mean_loss_lr_0.5_epoch_4"].push_back(kl.mean_loss);
          fmt::print("sparse LR (hogwild, {}): {:.3g} updates/s; lr 0.5, 4th epoch's mean loss "
                     "{:.4f}\n", reread ? "each weight read again before its store"
                                        : "stores from the margin's reads", kr.updates_per_s,
                     kl.mean_loss);
        }
      // The same on the tests' problem (20,000 rows, 2,000 features, 20 non-zeros;
      // docs/GPU.md's warps table) at the warps a process where lost updates begin to
      // cost: the 5th epoch's mean loss at lr 0.5, interleaved, 3 repetitions.
      GenerateOptions small;
      small.rows = 20000;
      small.features = 2000;
      small.nnz_per_row = 20;
      small.seed = 7;
      const Dataset sd = generate_sparse(small);
      for (unsigned w : {8u, 64u, 256u, 1024u})
        for (int rep = 0; rep < 3; ++rep)
          for (bool reread : {false, true}) {
            set_hogwild_reread(reread);
            const auto kl = time_kernel("logistic", {}, sd, bytes, Mode::hogwild, false, w, 0.5f, 4);
            out["sparse_lr_small"][std::to_string(w)][reread ? "reread" : "once"].push_back(
                kl.mean_loss);
            fmt::print("sparse LR 20k x 2k (hogwild, {} warps, {}): lr 0.5, 5th epoch's mean "
                       "loss {:.4f}\n", w, reread ? "read again" : "once", kl.mean_loss);
          }
      set_hogwild_reread(false);
      GenerateOptions fewer = g;  // one warp (serial) or one at a time (lock): fewer rows
      fewer.rows = std::min<std::size_t>(g.rows, 20000);
      const Dataset few = generate_sparse(fewer);
      for (Mode m : {Mode::atomic, Mode::lock, Mode::serial}) {
        const auto km = time_kernel("logistic", {}, m == Mode::atomic ? d : few, bytes, m);
        out["sparse_lr"]["modes"][std::string(to_string(m))] = km.updates_per_s;
        fmt::print("sparse LR ({}): {:.3g} updates/s ({:.3f}x hogwild)\n", to_string(m),
                   km.updates_per_s, km.updates_per_s / k.updates_per_s);
      }
    }
    {  // MF, Netflix-like: 480k users, 17.8k items, rank 32
      RatingsGenerateOptions g;
      g.users = 480189;
      g.items = 17770;
      g.rank = 32;
      g.ratings = ratings;
      const auto data = generate_ratings(g);
      ModelOptions o;
      o.rank = 32;
      // Per rating: the factor rows read and written, the biases read and written,
      // the rating's offsets, ids, target and place in the order.
      for (Dtype factors : {Dtype::f32, Dtype::f16}) {
        o.factors = factors;
        const double bytes =
            2 * 32 * 2.0 * static_cast<double>(element_bytes(factors)) + 2 * 4 * 2 + 8 + 8 + 4 + 4;
        const auto k = time_kernel("mf", o, data.train, bytes);
        const std::string key = factors == Dtype::f32 ? "mf" : "mf_fp16";
        out[key] = {{"updates_per_s", k.updates_per_s},
                    {"bytes_per_update", bytes},
                    {"fraction_of_copy", k.updates_per_s * bytes / yard}};
        fmt::print("MF rank 32 (hogwild, {} factors): {:.3g} ratings/s, {:.0f}% of the copy "
                   "kernel's bytes/s\n", to_string(factors), k.updates_per_s,
                   100 * k.updates_per_s * bytes / yard);
      }
      fmt::print("MF rank 32: fp16 factors {:.2f}x the ratings/s of fp32\n",
                 out["mf_fp16"]["updates_per_s"].get<double>() / out["mf"]["updates_per_s"].get<double>());
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "bench_gpu: error: {}\n", e.what());
    return e.exit_code();
  }
}
