// Every option of TrainConfig, declared once, by concern (hogwild/options.hpp).
#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hogwild/device.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/memory_space.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/models/mf.hpp"
#include "modes/mode_def.hpp"
#include "options/kinds.hpp"

namespace hogwild {

const char* to_string(Concern c) noexcept {
  switch (c) {
    case Concern::model: return "model";
    case Concern::optimiser: return "optimiser";
    case Concern::mode: return "mode";
    case Concern::nodes: return "nodes";
    case Concern::device: return "device";
    case Concern::instruments: return "instruments";
    case Concern::outputs: return "outputs";
    case Concern::process: return "process";
    case Concern::library: return "library";
  }
  return "?";
}

namespace options {

double parse_real(const std::string& name, const std::string& text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    throw ConfigError(fmt::format("--{}: expected a number, got {}", name, text));
  return v;
}

OptionInfo custom(Declared d, std::function<std::string(const TrainConfig&)> get,
                  std::function<void(TrainConfig&, const std::string&)> set) {
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  o.get = std::move(get);
  o.set = std::move(set);
  return o;
}

namespace {

constexpr double kDay = 86400;
constexpr double kNoLimit = std::numeric_limits<double>::infinity();
constexpr std::uint64_t kMost = std::numeric_limits<std::uint64_t>::max();

// "256,128" -> {256, 128}; anything else (empty, a zero, a sign, a space) is a ConfigError.
std::vector<std::size_t> parse_widths(const std::string& text) {
  std::vector<std::size_t> widths;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const bool digits = !item.empty() && item.size() <= 7 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoul(item) == 0)
      throw ConfigError("--hidden expects comma-separated positive layer widths such as "
                        "256,128, got \"" + text + "\"");
    widths.push_back(std::stoul(item));
    if (end == text.size()) return widths;
    begin = end + 1;
  }
}

// --sync-every: "500" (examples) or "2s", "250ms" (time); "" is off.
void set_sync_every(TrainConfig& c, const std::string& text) {
  c.sync_every = 0;
  c.sync_seconds = 0;
  if (text.empty()) return;
  const bool ms = text.ends_with("ms"), s = !ms && text.ends_with('s');
  const std::string number = text.substr(0, text.size() - (ms ? 2 : s ? 1 : 0));
  const bool digits = !number.empty() && number.size() <= 15 &&
                      number.find_first_not_of(ms || s ? "0123456789." : "0123456789") ==
                          std::string::npos &&
                      std::count(number.begin(), number.end(), '.') <= 1 && number != ".";
  if (digits && (ms || s)) {
    c.sync_seconds = std::stod(number) * (ms ? 1e-3 : 1.0);
    if (c.sync_seconds > 0) return;
  } else if (digits && std::stoull(number) > 0) {
    c.sync_every = std::stoull(number);
    return;
  }
  throw ConfigError("--sync-every expects a positive number of examples (500) or of seconds "
                    "(2s, 250ms), got \"" + text + "\"");
}

std::string sync_every_of(const TrainConfig& c) {
  if (c.sync_seconds > 0) return fmt::format("{}s", c.sync_seconds);
  return c.sync_every ? fmt::format("{}", c.sync_every) : "";
}

// --straggler W:FACTOR ("1:3", "0:1.5"); "" is none.
void set_straggler(TrainConfig& c, const std::string& text) {
  c.straggler_worker = -1;
  c.straggler_factor = 1;
  if (text.empty()) return;
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos && colon > 0 && colon <= 6 && colon + 1 < text.size() &&
        text.find_first_not_of("0123456789") == colon) {
      std::size_t used = 0;
      const double factor = std::stod(text.substr(colon + 1), &used);
      if (used == text.size() - colon - 1) {
        c.straggler_worker = std::stoi(text.substr(0, colon));
        c.straggler_factor = factor;
        return;
      }
    }
  } catch (const std::exception&) {
  }
  throw ConfigError("--straggler expects W:FACTOR (worker W's updates FACTOR times as long, "
                    "e.g. 1:3), got \"" + text + "\"");
}

std::vector<OptionInfo> model_options() {
  std::vector<OptionInfo> v;
  v.push_back(resumed(text({"model", Concern::model,
                           fmt::format("Model: {}", fmt::join(model_names(), ", ")), "NAME"}, [](auto& c) -> auto& { return c.model; })));
  v.push_back(resumed(real({"l2", Concern::model, "L2 penalty lambda (bias excluded)", "L"},
                   [](auto& c) -> auto& { return c.model_options.l2; }, 0, kNoLimit)));
  v.push_back(resumed(flag({"no-bias", Concern::model, "Do not learn an intercept", ""},
                           [](auto& c) -> auto& { return c.model_options.bias; }, true)));
  v.push_back(resumed(custom({"hidden", Concern::model,
                      "mlp: hidden layer widths, comma-separated", "W1,W2,..."},
                     [](const TrainConfig& c) {
                       return fmt::format("{}", fmt::join(c.model_options.hidden, ","));
                     },
                     [](TrainConfig& c, const std::string& t) {
                       c.model_options.hidden = parse_widths(t);
                     })));
  v.push_back(resumed(whole({"rank", Concern::model,
                     "Matrix factorization (mf): factors per user and item", "K"},
                    [](auto& c) -> auto& { return c.model_options.rank; }, 1, MfModel::kMaxRank)));
  v.push_back(choice({"matmul-precision", Concern::model,
                      "mlp: fp32, or bf16 (the training products' operands rounded to bfloat16 "
                      "and summed in float on the AMX tile unit, Intel Sapphire Rapids and "
                      "later, or with AVX512-BF16 through oneDNN, Intel Cooper Lake and AMD "
                      "Zen 4 and later; the weights, the step and evaluation stay fp32)",
                      "fp32|bf16"},
                     [](auto& c) -> auto& { return c.model_options.matmul; },
                     parse_matmul_precision, [](MatmulPrecision p) { return to_string(p); }));
  v.push_back(resumed(choice({"factors", Concern::model,
                      "mf with --device cuda: the factors' storage, fp32, or fp16 (half the "
                      "bytes a rating moves; the kernel computes in fp32 and rounds each stored "
                      "value; biases and AdaGrad's state stay fp32)",
                      "fp32|fp16"},
                     [](auto& c) -> auto& { return c.model_options.factors; },
                     [](const std::string& t) { return parse_dtype("--factors", t); },
                     [](Dtype d) { return to_string(d); })));
  return v;
}

std::vector<OptionInfo> optimiser_options() {
  std::vector<OptionInfo> v;
  v.push_back(resumed(choice({"optimizer", Concern::optimiser,
                      "sgd, or adagrad (per-coordinate steps; its accumulators are shared by "
                      "all workers like the weights)", "sgd|adagrad"},
                     [](auto& c) -> auto& { return c.optimizer; }, parse_optimizer,
                     [](Optimizer o) { return to_string(o); })));
  v.push_back(resumed(real({"lr", Concern::optimiser, "Initial step size", "LR"},
                   [](auto& c) -> auto& { return c.step_size.lr0; }, 0, kNoLimit, true)));
  v.push_back(resumed(real({"lr-decay", Concern::optimiser,
                    "Per-epoch backoff beta: lr <- beta * lr after each epoch (1 = constant)",
                    "BETA"},
                   [](auto& c) -> auto& { return c.step_size.decay; }, 0, 1, true)));
  v.push_back(resumed(real({"lr-inverse", Concern::optimiser,
                    "Inverse-time decay: lr / (1 + t / T) after t examples (0 = off)", "T"},
                   [](auto& c) -> auto& { return c.step_size.inverse_scale; }, 0, kNoLimit)));
  v.push_back(resumed(whole({"batch", Concern::optimiser, "Mini-batch size (1 = classic Hogwild!)", "B"},
                    [](auto& c) -> auto& { return c.batch; }, 1, 1u << 30)));
  v.push_back(resumed(whole({"seed", Concern::optimiser, "Seed for shuffling and initial weights", "N"},
                    [](auto& c) -> auto& { return c.seed; }, 0, kMost)));
  return v;
}

std::vector<OptionInfo> run_options() {
  std::vector<OptionInfo> v;
  v.push_back(resumed(choice({"mode", Concern::mode, mode_help(), "NAME"},
                     [](auto& c) -> auto& { return c.mode; },
                     [](const std::string& t) { return parse_mode(t); },
                     [](Mode m) { return std::string(to_string(m)); })));
  v.push_back(resumed(whole({"workers", Concern::mode,
                     "Worker processes (dp: threads splitting each mini-batch; serial always "
                     "uses one)", "N"},
                    [](auto& c) -> auto& { return c.workers; }, 1, 1024)));
  v.push_back(resumed(choice({"partition", Concern::mode,
                      "Which rows each worker trains: shuffled (each epoch, one permutation of "
                      "all rows drawn from the seed and the epoch, split among the workers; a "
                      "file sorted by class or user costs no accuracy) or contiguous (worker k "
                      "keeps the k-th slice of the file's rows and shuffles inside it, for "
                      "locality studies)", "shuffled|contiguous"},
                     [](auto& c) -> auto& { return c.partition; }, parse_partition,
                     [](Partition p) { return to_string(p); })));
  v.push_back(whole({"epochs", Concern::mode, "Passes over the training data", "N"},
                    [](auto& c) -> auto& { return c.epochs; }, 1, 1000000));
  v.push_back(whole_or_auto(
      {"merge-every", Concern::mode,
       "Each worker trains a private replica of the parameters and adds its change to the "
       "shared ones every N of its examples and at each epoch's end (modes hogwild, atomic; "
       "0 = off: updates go straight to the shared weights; auto: N adapts so that merging "
       "takes about 5 % of a worker's time)", "N|auto"},
      [](auto& c) -> auto& { return c.merge_every; }, 0, 1ull << 40, TrainConfig::kMergeAuto));
  v.push_back(resumed(whole({"hot-k", Concern::mode,
                     "Linear models, sparse rows: each worker trains its own copy of the bias "
                     "and of the K most frequent features, added to the shared weights every "
                     "--hot-flush examples (0 = off)", "K"},
                    [](auto& c) -> auto& { return c.hot_k; }, 0, 1u << 20)));
  v.push_back(whole_or_auto(
      {"hot-flush", Concern::mode,
       "Examples between flushes of the hot coordinates (auto: N adapts so that flushing "
       "takes about 5 % of a worker's time, between 16 and 4096)", "N|auto"},
      [](auto& c) -> auto& { return c.hot_flush; }, 1, 1u << 30, TrainConfig::kFlushAuto));
  {
    OptionInfo layout = choice(
        {"layout", Concern::mode,
         "How the workers write the shared weights: plain (every update in place), hot "
         "(each worker's own copy of the coordinates most rows touch, --hot-k with K from "
         "the data), replicas (a private replica each, merged as --merge-every auto), or "
         "auto: with 2 to 4 workers and a linear model on sparse rows, a probe in the first "
         "50-120 ms (half that in a run of under 500k examples a worker) times updates on the "
         "shared weights against the same on a replica, and with hot coordinates where their "
         "copy of the rows fits in 32 MiB, and keeps the cheapest, a private copy unless an "
         "example costs over 1.1x as much on it; otherwise plain (docs/PERFORMANCE.md)",
         "auto|plain|hot|replicas"},
        [](auto& c) -> auto& { return c.layout; }, parse_weight_layout,
        [](WeightLayout l) { return to_string(l); });
    layout.mode = "hogwild";
    v.push_back(std::move(layout));
  }
  {
    OptionInfo balance = choice(
        {"balance", Concern::mode,
         "How the workers share out each epoch's rows: steal (each starts on its own share; a "
         "worker that has finished every epoch takes half of what is left of the slowest "
         "share, so that all end together) or static (each trains its share only, and the run "
         "ends with the slowest; for straggler studies). Static where the run cannot steal: "
         "one worker, --partition contiguous, several nodes, --device cuda, --checkpoint, "
         "--resume", "steal|static"},
        [](auto& c) -> auto& { return c.balance; }, parse_balance,
        [](Balance b) { return std::string(to_string(b)); });
    balance.mode = "hogwild";
    v.push_back(std::move(balance));
  }
  v.push_back(agreed(real({"comm-timeout", Concern::mode,
                    "--mode ddp and several nodes: seconds a worker waits for the others in a "
                    "collective before it fails, naming them", "S"},
                   [](auto& c) -> auto& { return c.comm_timeout; }, 0, kDay, true, " seconds")));
  return v;
}

// The modes' fields (ModeDef::config_options: ddp's --accumulate, ps's --servers),
// each marked with its mode.
std::vector<OptionInfo> mode_fields() {
  std::vector<OptionInfo> v;
  for (const auto& name : mode_names())
    for (auto& o : detail::mode_def(parse_mode(name)).config_options()) {
      o.mode = name;
      v.push_back(std::move(o));
    }
  return v;
}

std::vector<OptionInfo> node_options() {
  std::vector<OptionInfo> v;
  v.push_back(agreed(whole({"nodes", Concern::nodes,
                     "Train on N machines, each running this command with its own --node-rank "
                     "(docs/DISTRIBUTED.md)", "N"},
                    [](auto& c) -> auto& { return c.nodes; }, 1, 4096)));
  v.push_back(whole({"node-rank", Concern::nodes, "This machine's place among the --nodes, from 0",
                     "K"},
                    [](auto& c) -> auto& { return c.node_rank; }, 0, 4095));
  v.push_back(text({"rendezvous", Concern::nodes,
                    "Where the nodes meet: file:DIR (a directory every node shares) or "
                    "redis://HOST:PORT", "file:DIR|redis://HOST:PORT"},
                   [](auto& c) -> auto& { return c.rendezvous; }));
  v.push_back(text({"iface", Concern::nodes,
                    "Network interface the nodes' workers talk over (eth0); needed across "
                    "machines", "NAME"},
                   [](auto& c) -> auto& { return c.iface; }));
  v.push_back(text({"run-id", Concern::nodes,
                    "Names the run in the rendezvous store (default: from the options and the "
                    "data); a new id per run", "ID"},
                   [](auto& c) -> auto& { return c.run_id; }));
  v.push_back(real({"join-timeout", Concern::nodes,
                    "Several nodes: seconds a node waits for the others to join before any "
                    "worker starts (a node may start that much later); nodes that differ are "
                    "refused at once", "S"},
                   [](auto& c) -> auto& { return c.join_timeout; }, 0, kDay, true, " seconds"));
  v.push_back(agreed(custom({"sync-every", Concern::nodes,
                      "Hogwild across nodes (--mode hogwild --nodes N): each node's worker 0 "
                      "averages its node's changes with the other nodes' every N of its "
                      "examples, or about every T seconds (2s, 250ms)", "N|Ts"},
                     sync_every_of, set_sync_every)));
  return v;
}

std::vector<OptionInfo> device_options() {
  std::vector<OptionInfo> v;
  v.push_back(choice({"device", Concern::device,
                      "Where the parameters live and the steps run: cpu (the shared arena) or "
                      "cuda (GPU memory shared by every worker process; workers start from the "
                      "fork server; every built-in model, ddp over NCCL; docs/GPU.md)",
                      "cpu|cuda"},
                     [](auto& c) -> auto& { return c.device; }, parse_device,
                     [](Device d) { return to_string(d); }));
  v.push_back(choice({"cuda-ipc", Concern::device,
                      "--device cuda: how workers share GPU memory: vmm (cuMemCreate, a file "
                      "descriptor passed over a Unix socket) or legacy (cudaIpcGetMemHandle)",
                      "vmm|legacy"},
                     [](auto& c) -> auto& { return c.cuda_ipc; }, parse_cuda_ipc,
                     [](CudaIpc i) { return to_string(i); }));
  v.push_back(whole({"device-streams", Concern::device,
                     "--device cuda, the MLP: streams per worker process, each training every "
                     "K-th mini-batch on the shared weights (Hogwild! workers inside the "
                     "process); measured on an H200, more than 1 gains nothing below 128 rows "
                     "a mini-batch (docs/GPU.md)", "K"},
                    [](auto& c) -> auto& { return c.device_streams; }, 1, 64));
  v.push_back(whole({"device-warps", Concern::device,
                     "--device cuda: warps per worker process, each a Hogwild! worker on the "
                     "shared weights (their number is the staleness); 0 = auto: as many as keep "
                     "the hottest coordinate's concurrent writers near 16 (docs/GPU.md); lock "
                     "and serial use 1", "N"},
                    [](auto& c) -> auto& { return c.device_warps; }, 0, kDeviceWarpsMax));
  return v;
}

std::vector<OptionInfo> instrument_options() {
  std::vector<OptionInfo> v;
  v.push_back(real({"eval-every", Concern::instruments,
                    "Also evaluate every S seconds during an epoch (0 = per epoch only)", "S"},
                   [](auto& c) -> auto& { return c.eval_every; }, 0, kNoLimit));
  v.push_back(flag({"telemetry", Concern::instruments,
                    "Measure the staleness of the workers' updates (lag and overlap histograms, "
                    "in the metrics and the summary; docs/EXPERIMENTS.md)", ""},
                   [](auto& c) -> auto& { return c.telemetry; }));
  v.push_back(whole({"telemetry-every", Concern::instruments,
                     "--telemetry: measure 1 in N updates, on average", "N"},
                    [](auto& c) -> auto& { return c.telemetry_every; }, 1, 1000000000));
  v.push_back(flag({"conflicts", Concern::instruments,
                    "Watch the writes to a sample of the weights (the bias, the top K features, "
                    "K random): conflicts and lost-update mass, in the summary (every write then "
                    "goes one coordinate at a time)", ""},
                   [](auto& c) -> auto& { return c.conflicts; }));
  v.push_back(flag({"digest", Concern::instruments,
                    "Put the SHA-256 of the final weights in the summary (weights_sha256), to "
                    "check that two runs ended with the same weights (about 3 ms a MB of "
                    "weights; docs/CLI.md)", ""},
                   [](auto& c) -> auto& { return c.digest_weights; }));
  v.push_back(whole({"conflict-k", Concern::instruments, "--conflicts: K of the sample", "K"},
                    [](auto& c) -> auto& { return c.conflict_k; }, 0, 64));
  v.push_back(whole({"grad-delay-ns", Concern::instruments,
                     "Busy work per example inside each update, in nanoseconds (a costlier "
                     "gradient: the Hogwild! paper's Fig. 5c; held under the lock in lock mode)",
                     "N"},
                    [](auto& c) -> auto& { return c.grad_delay_ns; }, 0, 1000000000));
  v.push_back(custom({"straggler", Concern::instruments,
                      "Make worker W's updates FACTOR times as long (a slow worker)", "W:FACTOR"},
                     [](const TrainConfig& c) {
                       return c.straggler_worker < 0 ? std::string()
                                                     : fmt::format("{}:{}", c.straggler_worker,
                                                                   c.straggler_factor);
                     },
                     set_straggler));
  return v;
}

std::vector<OptionInfo> output_options() {
  std::vector<OptionInfo> v;
  v.push_back(text({"checkpoint", Concern::outputs,
                    "Save parameters and progress to FILE (atomically) at the end, when stopped "
                    "by a signal, and every --checkpoint-every seconds", "FILE"},
                   [](auto& c) -> auto& { return c.checkpoint; }));
  v.push_back(real({"checkpoint-every", Concern::outputs,
                    "Seconds between checkpoints (0 = only at the end or when stopped)", "S"},
                   [](auto& c) -> auto& { return c.checkpoint_every; }, 0, kNoLimit));
  v.push_back(text({"resume", Concern::outputs,
                    "Continue the run saved in FILE (same data and options; --epochs may grow)",
                    "FILE"},
                   [](auto& c) -> auto& { return c.resume; }));
  v.push_back(text({"save-model", Concern::outputs,
                    "Write the trained model to FILE at the end and beside each checkpoint (safetensors: numpy, PyTorch "
                    "and hogwild_predict read it; - for standard output)", "FILE"},
                   [](auto& c) -> auto& { return c.save_model; }));
  v.push_back(agreed(text({"init-from", Concern::outputs,
                    "Start from the weights of a model FILE that --save-model wrote (same model "
                    "and shapes) instead of the initialisation: fine-tuning, warm starts",
                    "FILE"},
                   [](auto& c) -> auto& { return c.init_from; })));
  return v;
}

std::vector<OptionInfo> process_options() {
  std::vector<OptionInfo> v;
  v.push_back(text({"shm-dir", Concern::process,
                    "Put the parameter arena in a file-backed mapping in DIR instead of /dev/shm",
                    "DIR"},
                   [](auto& c) -> auto& { return c.shm_dir; }));
  v.push_back(flag({"pin", Concern::process,
                    "Pin worker k to the (k mod n)-th CPU this process may use", ""},
                   [](auto& c) -> auto& { return c.pin; }));
  v.push_back(flag({"huge-pages", Concern::process,
                    "Back the parameter arena with 2 MiB pages where the system allows it", ""},
                   [](auto& c) -> auto& { return c.huge_pages; }));
  v.push_back(whole({"max-restarts", Concern::process,
                     "Respawn a crashed worker (it continues its partition) at most K times per "
                     "run", "K"},
                    [](auto& c) -> auto& { return c.max_restarts; }, 0, 1000));
  v.push_back(real({"stall-timeout", Concern::process,
                    "Seconds a worker may finish no example before the run says so and kills it "
                    "(respawned under --max-restarts, else exit 3); 0 = off", "S"},
                   [](auto& c) -> auto& { return c.stall_timeout; }, 0, kDay, false, " seconds"));
  v.push_back(choice({"worker-start", Concern::process,
                      "How workers start: fork (copies of this process: the fastest start) or "
                      "fork-server (forked by the clean process this program forks first thing, "
                      "from a description of the run: what GPU and multi-node modes need)",
                      "fork|fork-server"},
                     [](auto& c) -> auto& { return c.worker_start; }, parse_worker_start,
                     [](WorkerStart s) { return to_string(s); }));
  // The embedding program's choices (the CLI makes its own).
  v.push_back(flag({"result-parameters", Concern::library,
                    "Copy the final weights into the result", ""},
                   [](auto& c) -> auto& { return c.result_parameters; }));
  v.push_back(flag({"handle-signals", Concern::library,
                    "Stop at SIGINT/SIGTERM with the weights at the stop", ""},
                   [](auto& c) -> auto& { return c.handle_signals; }));
  v.end()[-1].command_line = v.end()[-2].command_line = false;
  return v;
}

// The modes' own (ModeOption): "" while not given, so that the mode's fallback holds.
std::vector<OptionInfo> declared_by_modes() {
  std::vector<OptionInfo> v;
  for (const auto& d : detail::declared_mode_options()) {
    const std::string name = d.option.name;
    auto o = custom({name, Concern::mode,
                     fmt::format("{} (--mode {}; {} to {}, default {})", d.option.help, d.modes,
                                 d.option.low, d.option.high, d.option.fallback),
                     "N"},
                    [name](const TrainConfig& c) {
                      const auto it = c.mode_options.find(name);
                      return it == c.mode_options.end() ? std::string()
                                                        : fmt::format("{}", it->second);
                    },
                    [name](TrainConfig& c, const std::string& t) {
                      if (t.empty())
                        c.mode_options.erase(name);
                      else
                        c.mode_options[name] = parse_whole<std::int64_t>(
                            name, t, std::numeric_limits<std::int64_t>::min() / 2,
                            std::numeric_limits<std::int64_t>::max() / 2);
                    });
    o.mode = d.modes;
    o.resume_must_match = d.option.resume_must_match;
    o.range = fmt::format("{} to {}", d.option.low, d.option.high);
    v.push_back(std::move(o));
  }
  return v;
}

std::vector<OptionInfo> all_options() {
  std::vector<OptionInfo> all;
  for (auto* group : {model_options, optimiser_options, run_options, mode_fields,
                      node_options, device_options, instrument_options, output_options,
                      process_options, declared_by_modes})
    for (auto& o : group()) all.push_back(std::move(o));
  return all;
}

}  // namespace
}  // namespace options

const std::vector<OptionInfo>& train_options() {
  static const std::vector<OptionInfo> all = options::all_options();
  return all;
}

const OptionInfo* find_option(std::string_view name) {
  for (const auto& o : train_options())
    if (o.name == name) return &o;
  return nullptr;
}

void set_option(TrainConfig& config, std::string_view name, const std::string& value) {
  const OptionInfo* o = find_option(name);
  if (!o) throw ConfigError(fmt::format("there is no option --{}", name));
  o->set(config, value);
}

std::string option_value(const TrainConfig& config, std::string_view name) {
  const OptionInfo* o = find_option(name);
  if (!o) throw ConfigError(fmt::format("there is no option --{}", name));
  return o->get(config);
}

}  // namespace hogwild
