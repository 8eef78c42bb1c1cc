// hogwild_train: lock-free parallel SGD across processes that share memory.
//   hogwild_train --train rcv1.svm --test rcv1.t.svm --model logistic
//                 --workers 4 --mode hogwild --epochs 10 --lr 0.5
// prints one progress line per epoch and a summary; exit status 0 on success,
// 2 for bad input or options, 3 when a worker fails, 4 when a resource is short,
// 130/143 when interrupted (docs/CLI.md).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <limits>
#include <optional>
#include <thread>

#include "hogwild/config.hpp"
#include "hogwild/arena.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/trainer.hpp"
#include "data/file_io.hpp"
#include "device/kernel_registry.hpp"
#include "modes/mode_def.hpp"
#include "file_roles.hpp"
#include "options.hpp"
#include "progress_line.hpp"

namespace {

struct Options {
  std::string train, test, train_labels, test_labels;
  std::string mode = "hogwild";
  std::string partition = "shuffled";
  std::string worker_start = "fork";
  std::string device = "cpu";
  std::string cuda_ipc = "vmm";
  std::string optimizer = "sgd";
  std::string matmul = "fp32";
  std::string factors = "fp32";
  std::string metrics, summary;
  std::string hidden;
  std::string sync_every;
  std::string straggler;
  std::string storage = "auto";
  unsigned threads = 0;
  // Where the lines for a person go: stdout, or stderr when stdout carries JSON
  // (--metrics - or --summary -).
  std::FILE* human = stdout;
  double bucket_mb = 0;
  double output_wait = 0;  // seconds
  bool no_bias = false;
  bool quiet = false;
  bool cleanup = false;
};

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
      throw hogwild::ConfigError("--hidden expects comma-separated positive layer widths "
                                 "such as 256,128, got \"" + text + "\"");
    widths.push_back(std::stoul(item));
    if (end == text.size()) return widths;
    begin = end + 1;
  }
}

// --sync-every: "500" (examples) or "2s", "250ms" (time); anything else is a ConfigError.
void parse_sync_every(const std::string& text, hogwild::TrainConfig& cfg) {
  const bool ms = text.ends_with("ms"), s = !ms && text.ends_with('s');
  const std::string number = text.substr(0, text.size() - (ms ? 2 : s ? 1 : 0));
  const bool digits = !number.empty() && number.size() <= 15 &&
                      number.find_first_not_of(ms || s ? "0123456789." : "0123456789") ==
                          std::string::npos &&
                      std::count(number.begin(), number.end(), '.') <= 1 && number != ".";
  if (digits && (ms || s)) {
    cfg.sync_seconds = std::stod(number) * (ms ? 1e-3 : 1.0);
    if (cfg.sync_seconds > 0) return;
  } else if (digits && std::stoull(number) > 0) {
    cfg.sync_every = std::stoull(number);
    return;
  }
  throw hogwild::ConfigError("--sync-every expects a positive number of examples (500) or of "
                             "seconds (2s, 250ms), got \"" + text + "\"");
}

// --straggler W:FACTOR ("1:3", "0:1.5"); anything else is a ConfigError.
void parse_straggler(const std::string& text, hogwild::TrainConfig& cfg) {
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos && colon > 0 && colon <= 6 && colon + 1 < text.size() &&
        text.find_first_not_of("0123456789") == colon) {
      std::size_t used = 0;
      const double factor = std::stod(text.substr(colon + 1), &used);
      if (used == text.size() - colon - 1) {
        cfg.straggler_worker = std::stoi(text.substr(0, colon));
        cfg.straggler_factor = factor;
        return;
      }
    }
  } catch (const std::exception&) {
  }
  throw hogwild::ConfigError("--straggler expects W:FACTOR (worker W's updates FACTOR times as "
                             "long, e.g. 1:3), got \"" + text + "\"");
}

// Loads a data set and stores its rows as --storage says; a test set (`train` given)
// is stored as the training set is (hogwild::stored_like), as train() would. The
// line printed says how, and the density a sparse file had.
hogwild::Dataset load(const std::string& path, const std::string& labels, const Options& o,
                      hogwild::Storage storage, double dense_at, const char* what, bool hot_k,
                      const hogwild::Dataset* train = nullptr) {
  using hogwild::Storage;
  const auto t0 = std::chrono::steady_clock::now();
  // Infinity: sparse files stay sparse here, and the choice is made below.
  hogwild::Dataset d = hogwild::load_dataset(
      path, labels, {o.threads, Storage::automatic, std::numeric_limits<double>::infinity()});
  const bool was_sparse = d.layout() == hogwild::Layout::sparse;
  const std::size_t nnz = d.nnz();
  const double density = hogwild::density(d);
  std::string how;
  if (train) {
    d = hogwild::stored_like(d, *train);
    how = " as the training set";
  } else if (hot_k && storage == Storage::automatic && hogwild::stores_dense(d, storage, dense_at)) {
    how = ", kept for --hot-k";  // hot coordinates renumber sparse rows
  } else {
    d = hogwild::with_storage(d, storage, dense_at);
  }
  if (train && d.rows() == 0)  // an evaluation of nothing would print no accuracy, and exit 0
    throw hogwild::ConfigError(fmt::format("--test {} has no rows: nothing to evaluate on", path));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.quiet)
    fmt::print(o.human, "{} {}: {} rows, {} features, {} non-zeros ({:.2f}s), stored {}{}{}\n", what, path,
               d.rows(), d.cols(), nnz, s, to_string(d.layout()), how,
               was_sparse ? fmt::format(" (density {:.3g})", density) : std::string());
  return d;
}

// Where --nodes and --node-rank came from, for the summary.
struct NodesFrom {
  std::string nodes = "default", node_rank = "default";
};

// A value of the environment as a whole number, or nullopt.
std::optional<unsigned> env_count(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  const std::string s = v;
  if (s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
    throw hogwild::ConfigError(fmt::format("{}={} in the environment is not a whole number", name, s));
  return static_cast<unsigned>(std::stoul(s));
}

// A job started by a launcher needs no --nodes or --node-rank: with --rendezvous
// given (a run across machines needs one anyway, and a one-machine run inside a
// Slurm allocation must not become one), each that is not on the command line comes
// from Slurm's SLURM_NNODES and SLURM_NODEID, or else from torchrun's WORLD_SIZE and
// RANK (one hogwild_train a rank: each process is a node). Flags win.
NodesFrom nodes_from_launcher(hogwild::TrainConfig& cfg, bool nodes_given, bool rank_given) {
  NodesFrom from;
  if (nodes_given) from.nodes = "--nodes";
  if (rank_given) from.node_rank = "--node-rank";
  if (cfg.rendezvous.empty()) return from;
  for (const auto& [size, rank] : {std::pair{"SLURM_NNODES", "SLURM_NODEID"},
                                   std::pair{"WORLD_SIZE", "RANK"}}) {
    const auto n = env_count(size), k = env_count(rank);
    if (!n && !k) continue;
    if (!nodes_given && n) {
      cfg.nodes = *n;
      from.nodes = size;
    }
    if (!rank_given && k) {
      cfg.node_rank = *k;
      from.node_rank = rank;
    }
    break;
  }
  return from;
}

int run(int argc, char** argv) {
  hogwild::TrainConfig cfg;
  Options o;
  CLI::App app{"Lock-free parallel SGD (Hogwild!) across processes that share memory.\n"
               "Workers are forked processes; the model's parameters live in one shared-memory\n"
               "segment that they update without locks (or as --mode says).",
               "hogwild_train"};
  app.get_formatter()->column_width(34);
  app.set_version_flag("--version", std::string("hogwild_train ") + HOGWILD_VERSION);
  app.add_option("--train", o.train,
                 "Training data: libsvm/svmlight text, MNIST IDX images, rating triples "
                 "(user item rating [timestamp]: MovieLens u.data, ratings.csv), or a binary cache "
                 "(hogwild_data convert); .gz is read transparently")->option_text("FILE");
  app.add_option("--test", o.test, "Test data, same formats; evaluated after every epoch")->option_text("FILE");
  app.add_option("--train-labels", o.train_labels,
                 "IDX labels file for --train (default: the images path with "
                 "images-idx3 replaced by labels-idx1)")->option_text("FILE");
  app.add_option("--test-labels", o.test_labels, "IDX labels file for --test")->option_text("FILE");
  app.add_option("--model", cfg.model, "Model: " + [] {
    std::string s;
    for (auto& n : hogwild::model_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }())->capture_default_str();
  app.add_option("--workers", cfg.workers, "Worker processes (dp: threads splitting each mini-batch; serial always uses one)")
      ->capture_default_str();
  app.add_option("--mode", o.mode, hogwild::mode_help())
      ->capture_default_str();
  // The options the modes declare (ModeOption, src/modes/<mode>/mode.cpp), each once.
  std::map<std::string, std::int64_t> mode_values;
  for (const auto& d : hogwild::detail::declared_mode_options())
    app.add_option("--" + d.option.name, mode_values[d.option.name],
                   fmt::format("{} (--mode {}; {} to {}, default {})", d.option.help, d.modes,
                               d.option.low, d.option.high, d.option.fallback))
        ->option_text("N");
  app.add_option("--partition", o.partition,
                 "Which rows each worker trains: shuffled (each epoch, one permutation of all "
                 "rows drawn from the seed and the epoch, split among the workers; a file "
                 "sorted by class or user costs no accuracy) or contiguous (worker k keeps the "
                 "k-th slice of the file's rows and shuffles inside it, for locality studies)")
      ->capture_default_str()->option_text("shuffled|contiguous");
  app.add_option("--optimizer", o.optimizer,
                 "sgd, or adagrad (per-coordinate steps; its accumulators are shared by all "
                 "workers like the weights)")
      ->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "Passes over the training data")->capture_default_str();
  app.add_option("--lr", cfg.step_size.lr0, "Initial step size")->capture_default_str();
  app.add_option("--lr-decay", cfg.step_size.decay,
                 "Per-epoch backoff beta: lr <- beta * lr after each epoch (1 = constant)")
      ->capture_default_str();
  app.add_option("--lr-inverse", cfg.step_size.inverse_scale,
                 "Inverse-time decay: lr / (1 + t / T) after t examples (0 = off)")
      ->capture_default_str();
  app.add_option("--batch", cfg.batch, "Mini-batch size (1 = classic Hogwild!)")
      ->capture_default_str();
  app.add_option("--l2", cfg.model_options.l2, "L2 penalty lambda (bias excluded)")
      ->capture_default_str();
  app.add_option("--hidden", o.hidden,
                 "mlp: hidden layer widths, comma-separated (default 256,128)")
      ->option_text("W1,W2,...");
  app.add_option("--matmul-precision", o.matmul,
                 "mlp: fp32, or bf16 (the training products' operands rounded to bfloat16 and "
                 "summed in float on the AMX tile unit, Intel Sapphire Rapids and later, or "
                 "with AVX512-BF16 through oneDNN, Intel Cooper Lake and AMD Zen 4 and later; "
                 "the weights, the step and evaluation stay fp32)")
      ->capture_default_str()->option_text("fp32|bf16");
  app.add_flag("--no-bias", o.no_bias, "Do not learn an intercept");
  app.add_option("--rank", cfg.model_options.rank, "Matrix factorization (mf): factors per user and item")
      ->capture_default_str();
  app.add_option("--factors", o.factors,
                 "mf with --device cuda: the factors' storage, fp32, or fp16 (half the bytes a "
                 "rating moves; the kernel computes in fp32 and rounds each stored value; "
                 "biases and AdaGrad's state stay fp32)")
      ->capture_default_str()->option_text("fp32|fp16");
  app.add_option("--seed", cfg.seed, "Seed for shuffling and initial weights")
      ->capture_default_str();
  app.add_option("--eval-every", cfg.eval_every,
                 "Also evaluate every S seconds during an epoch (0 = per epoch only)")
      ->capture_default_str();
  app.add_option("--metrics", o.metrics, "Write one JSON object per evaluation to FILE")->option_text("FILE");
  app.add_option("--summary", o.summary, "Write the run's summary as one JSON object to FILE")->option_text("FILE");
  app.add_option("--output-wait", o.output_wait,
                 "Seconds to wait for another run that writes one of this run's outputs to end, "
                 "before refusing (exit 2); hogwild_sweep gives 60")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str()->option_text("S");
  app.add_option("--shm-dir", cfg.shm_dir,
                 "Put the parameter arena in a file-backed mapping in DIR instead of /dev/shm")->option_text("DIR");
  app.add_flag("--pin", cfg.pin, "Pin worker k to the (k mod n)-th CPU this process may use");
  app.add_flag("--telemetry", cfg.telemetry,
               "Measure the staleness of the workers' updates (lag and overlap histograms, in "
               "the metrics and the summary; docs/EXPERIMENTS.md)");
  app.add_flag("--conflicts", cfg.conflicts,
               "Watch the writes to a sample of the weights (the bias, the top K features, K "
               "random): conflicts and lost-update mass, in the summary (every write then goes "
               "one coordinate at a time)");
  app.add_option("--conflict-k", cfg.conflict_k, "--conflicts: K of the sample")
      ->capture_default_str()->option_text("K");
  app.add_option("--telemetry-every", cfg.telemetry_every,
                 "--telemetry: measure 1 in N updates, on average")
      ->capture_default_str()->option_text("N");
  app.add_flag("--huge-pages", cfg.huge_pages,
               "Back the parameter arena with 2 MiB pages where the system allows it");
  app.add_option("--merge-every", cfg.merge_every,
                 "Each worker trains a private replica of the parameters and adds its change "
                 "to the shared ones every N of its examples and at each epoch's end "
                 "(modes hogwild, atomic; 0 = off: updates go straight to the shared weights; "
                 "auto: N adapts so that merging takes about 5 % of a worker's time)")
      ->transform(CLI::Transformer({{"auto", std::to_string(hogwild::TrainConfig::kMergeAuto)}}))
      ->capture_default_str()->option_text("N|auto");
  app.add_option("--hot-k", cfg.hot_k,
                 "Linear models, sparse rows: each worker trains its own copy of the bias and "
                 "of the K most frequent features, added to the shared weights every "
                 "--hot-flush examples (0 = off)")
      ->capture_default_str();
  app.add_option("--hot-flush", cfg.hot_flush,
                 "Examples between flushes of the hot coordinates")
      ->capture_default_str();
  app.add_option("--accumulate", cfg.accumulate,
                 "--mode ddp: combine the gradients of K mini-batches before one update "
                 "(PyTorch's no_sync)")
      ->capture_default_str()->option_text("K");
  app.add_option("--bucket-mb", o.bucket_mb,
                 "--mode ddp: reduce the gradients in buckets of this many MiB after a first "
                 "one of 1 MiB (default 25, PyTorch's)")
      ->option_text("MB");
  app.add_option("--comm", cfg.comm,
                 "--mode ddp: how the workers combine gradients: shm (the shared arena) or gloo "
                 "(TCP over loopback, for comparison)")
      ->capture_default_str()->option_text("shm|gloo");
  app.add_option("--nodes", cfg.nodes,
                 "--mode ddp on N machines, each running this command with its own --node-rank "
                 "(docs/DISTRIBUTED.md)")
      ->capture_default_str()->option_text("N");
  app.add_option("--node-rank", cfg.node_rank, "This machine's place among the --nodes, from 0")
      ->capture_default_str()->option_text("K");
  app.add_option("--rendezvous", cfg.rendezvous,
                 "Where the nodes meet: file:DIR (a directory every node shares) or "
                 "redis://HOST:PORT")
      ->option_text("file:DIR|redis://HOST:PORT");
  app.add_option("--iface", cfg.iface,
                 "Network interface the nodes' workers talk over (eth0); needed across machines")
      ->option_text("NAME");
  app.add_option("--run-id", cfg.run_id,
                 "Names the run in the rendezvous store (default: from the options and the "
                 "data); a new id per run")
      ->option_text("ID");
  app.add_option("--sync-every", o.sync_every,
                 "Hogwild across nodes (--mode hogwild --nodes N): each node's worker 0 averages "
                 "its node's changes with the other nodes' every N of its examples, or about "
                 "every T seconds (2s, 250ms)")
      ->option_text("N|Ts");
  app.add_option("--grad-delay-ns", cfg.grad_delay_ns,
                 "Busy work per example inside each update, in nanoseconds (a costlier gradient: "
                 "the Hogwild! paper's Fig. 5c; held under the lock in lock mode)")
      ->capture_default_str()->option_text("N");
  app.add_option("--straggler", o.straggler,
                 "Make worker W's updates FACTOR times as long (a slow worker)")
      ->option_text("W:FACTOR");
  app.add_option("--comm-timeout", cfg.comm_timeout,
                 "--mode ddp: seconds a worker waits for the others in a collective before it "
                 "fails, naming them")
      ->capture_default_str()->option_text("S");
  app.add_option("--join-timeout", cfg.join_timeout,
                 "Several nodes: seconds a node waits for the others to join before any worker "
                 "starts (a node may start that much later); nodes that differ are refused at once")
      ->capture_default_str()->option_text("S");
  app.add_option("--worker-start", o.worker_start,
                 "How workers start: fork (copies of this process: the fastest start) or "
                 "fork-server (forked by the clean process this program forks first thing, "
                 "from a description of the run: what GPU and multi-node modes need)")
      ->capture_default_str()->option_text("fork|fork-server");
  app.add_option("--servers", cfg.servers,
                 "--mode ps: server processes, each owning a slice of every tensor")
      ->capture_default_str()->option_text("S");
  app.add_option("--push-every", cfg.push_every,
                 "--mode ps: a replica pushes its accumulated updates every N mini-batches")
      ->capture_default_str()->option_text("N");
  app.add_option("--fetch-every", cfg.fetch_every,
                 "--mode ps: a replica fetches fresh weights every M mini-batches")
      ->capture_default_str()->option_text("M");
  app.add_option("--staleness", cfg.staleness,
                 "--mode ps: a replica more than S pushes ahead of the slowest waits (0: "
                 "bulk-synchronous; default: no bound)")->option_text("S");
  app.add_option_function<std::string>(
         "--key-ranges",
         [&cfg](const std::string& v) { cfg.hashed_keys = v == "hashed"; },
         "--mode ps: which coordinates each server owns: contiguous (a slice of every "
         "tensor; dense tensors go as buckets) or hashed (spread by a hash of the index, "
         "so that popular low ids load every server alike; pairs only)")
      ->check(CLI::IsMember({"contiguous", "hashed"}))
      ->option_text("contiguous|hashed");
  app.add_option("--device", o.device,
                 "Where the parameters live and the steps run: cpu (the shared arena) or cuda "
                 "(GPU memory shared by every worker process; workers start from the fork "
                 "server; every built-in model, ddp over NCCL; docs/GPU.md)")
      ->capture_default_str()->option_text("cpu|cuda");
  app.add_option("--cuda-ipc", o.cuda_ipc,
                 "--device cuda: how workers share GPU memory: vmm (cuMemCreate, a file "
                 "descriptor passed over a Unix socket) or legacy (cudaIpcGetMemHandle)")
      ->capture_default_str()->option_text("vmm|legacy");
  app.add_option("--device-streams", cfg.device_streams,
                 "--device cuda, the MLP: streams per worker process, each training every K-th "
                 "mini-batch on the shared weights (Hogwild! workers inside the process)")
      ->capture_default_str();
  app.add_option("--device-warps", cfg.device_warps,
                 "--device cuda: warps per worker process, each a Hogwild! worker on the shared "
                 "weights (their number is the staleness); 0 = auto: as many as keep the hottest "
                 "coordinate's concurrent writers near 16 (docs/GPU.md); lock and serial use 1")
      ->capture_default_str()->option_text("N");
  app.add_option("--max-restarts", cfg.max_restarts,
                 "Respawn a crashed worker (it continues its partition) at most K times per run")
      ->capture_default_str()->option_text("K");
  app.add_option("--stall-timeout", cfg.stall_timeout,
                 "Seconds a worker may finish no example before the run says so and kills it "
                 "(respawned under --max-restarts, else exit 3); 0 = off")
      ->capture_default_str()->option_text("S");
  app.add_option("--checkpoint", cfg.checkpoint,
                 "Save parameters and progress to FILE (atomically) at the end, when stopped "
                 "by a signal, and every --checkpoint-every seconds")->option_text("FILE");
  app.add_option("--checkpoint-every", cfg.checkpoint_every,
                 "Seconds between checkpoints (0 = only at the end or when stopped)")
      ->capture_default_str()->option_text("S");
  app.add_option("--resume", cfg.resume,
                 "Continue the run saved in FILE (same data and options; --epochs may grow)")
      ->option_text("FILE");
  app.add_option("--storage", o.storage,
                 "Rows of libsvm text and caches: sparse, dense (bytes when every value is "
                 "k/255, else floats), or auto (dense from a density of " +
                     fmt::format("{:g} ({:g} for the linear models)", hogwild::kDenseDensity,
                                 hogwild::kDenseDensityLinear) +
                     ", where the dense kernels win; sparse with --hot-k). The test set "
                     "follows the training set")
      ->capture_default_str()->option_text("auto|sparse|dense");
  app.add_option("--threads", o.threads, "Threads for parsing text data (0 = all cores)")
      ->capture_default_str()->check(hogwild::tools::parser_threads());
  app.add_flag("-q,--quiet", o.quiet, "Print only the final summary line");
  app.add_flag("--cleanup", o.cleanup,
               "Remove shared-memory segments this user's dead hogwild runs left behind, and "
               "the temporaries killed writers left beside the --checkpoint, --summary and "
               "--metrics given with it, then exit");
  hogwild::tools::refuse_negative_counts(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A wrong option or value, said as every other error is.
    fmt::print(stderr, "hogwild_train: error: {} (see --help)\n", e.what());
    return hogwild::kExitBadInput;
  }

  if (o.cleanup) {
    auto removed = hogwild::cleanup_stale_segments();
    for (auto& n : removed) fmt::print("removed /dev/shm/{}\n", n);
    fmt::print("{} stale segment(s) removed\n", removed.size());
    // And the temporaries a killed writer left beside the outputs named with it.
    for (const std::string* out : {&cfg.checkpoint, &o.summary, &o.metrics}) {
      if (out->empty() || *out == "-") continue;
      const auto target = hogwild::detail::output_target(*out);
      if (target.kind != hogwild::detail::OutputTarget::Kind::replace) continue;
      if (const std::size_t n = hogwild::detail::remove_stale_temporaries(target.path))
        fmt::print("removed {} stale temporar{} of {}\n", n, n == 1 ? "y" : "ies", *out);
    }
    return 0;
  }
  if (o.train.empty()) throw hogwild::ConfigError("--train is required (see --help)");
  // Standard output, however named (-, /dev/stdout, a link to /proc/self/fd/1).
  const auto to_stdout = [](const std::string& path) {
    if (path.empty()) return false;
    const auto t = hogwild::detail::output_target(path);
    return t.kind == hogwild::detail::OutputTarget::Kind::stream && t.fd == STDOUT_FILENO;
  };
  if (to_stdout(o.metrics) && to_stdout(o.summary))
    throw hogwild::ConfigError("--metrics and --summary would mix on standard output: give "
                               "one of them a file");
  if (to_stdout(o.metrics) || to_stdout(o.summary)) o.human = stderr;  // stdout: JSON alone
  if (!cfg.checkpoint.empty() && hogwild::detail::output_target(cfg.checkpoint).kind ==
                                     hogwild::detail::OutputTarget::Kind::stream)
    throw hogwild::ConfigError(fmt::format(
        "--checkpoint {}: a checkpoint is a file that each save replaces whole; give a path",
        cfg.checkpoint));
  const NodesFrom nodes_from = nodes_from_launcher(cfg, app.count("--nodes") > 0,
                                                  app.count("--node-rank") > 0);
  cfg.mode = hogwild::parse_mode(o.mode);
  for (const auto& [name, value] : mode_values)
    if (app.count("--" + name) > 0) cfg.mode_options[name] = value;
  cfg.handle_signals = true;  // SIGINT/SIGTERM: final checkpoint and summary, exit 130/143
  cfg.result_parameters = false;  // the weights go to the checkpoint only: no copy at the end
  cfg.partition = hogwild::parse_partition(o.partition);
  cfg.worker_start = hogwild::parse_worker_start(o.worker_start);
  cfg.device = hogwild::parse_device(o.device);
  cfg.cuda_ipc = hogwild::parse_cuda_ipc(o.cuda_ipc);
  cfg.model_options.factors = hogwild::parse_dtype("--factors", o.factors);
  if (app.count("--cuda-ipc") && cfg.device != hogwild::Device::cuda)
    throw hogwild::ConfigError("--cuda-ipc applies to --device cuda only");
  if (cfg.device == hogwild::Device::cuda) {
    // CUDA does not survive fork: GPU workers start from the fork server, which
    // main started before anything else (wants_fork_server).
    if (app.count("--worker-start") && cfg.worker_start == hogwild::WorkerStart::fork)
      throw hogwild::ConfigError("--device cuda starts its workers from the fork server (CUDA "
                                 "does not survive fork): leave out --worker-start fork");
    cfg.worker_start = hogwild::WorkerStart::fork_server;
    // Before the data is read: a machine without a GPU says so at once.
    const hogwild::CudaStatus gpu = hogwild::cuda_status();
    if (!gpu.ok) throw hogwild::ConfigError("no CUDA device: " + gpu.message);
  }
  cfg.optimizer = hogwild::parse_optimizer(o.optimizer);
  cfg.model_options.bias = !o.no_bias;
  cfg.model_options.matmul = hogwild::parse_matmul_precision(o.matmul);
  const hogwild::Storage storage = hogwild::parse_storage(o.storage);
  if (!o.hidden.empty() || app.count("--hidden")) cfg.model_options.hidden = parse_widths(o.hidden);
  if (app.count("--sync-every")) parse_sync_every(o.sync_every, cfg);
  if (app.count("--straggler")) parse_straggler(o.straggler, cfg);
  if (app.count("--bucket-mb")) {
    if (!(o.bucket_mb > 0) || o.bucket_mb > 65536)
      throw hogwild::ConfigError(fmt::format("--bucket-mb must be from 0 to 65536, got {}", o.bucket_mb));
    cfg.bucket_bytes = static_cast<std::size_t>(o.bucket_mb * (1 << 20));
  }
  cfg.validate();
  // Segments a crashed run of ours left behind (its name lives only microseconds).
  for (auto& n : hogwild::cleanup_stale_segments())
    fmt::print(stderr, "hogwild_train: removed /dev/shm/{}, left by a dead run\n", n);
  auto model = hogwild::make_model(cfg.model, cfg.model_options);  // fail fast on a bad name
  if (hogwild::workers_used(cfg.mode, cfg.workers) < cfg.workers)
    fmt::print(stderr, "hogwild_train: warning: --mode {} trains with one worker; --workers {} is ignored\n",
               hogwild::to_string(cfg.mode), cfg.workers);
  // A model's own options given to another model are said, not silently dropped
  // (a warning: a sweep may pass one to every model it runs).
  for (const auto& [option, owner] : {std::pair{"--rank", "mf"}, std::pair{"--hidden", "mlp"}})
    if (app.count(option) && cfg.model != owner)
      fmt::print(stderr, "hogwild_train: warning: {} applies to --model {} only; --model {} ignores it\n",
                 option, owner, cfg.model);
  const unsigned cores = std::thread::hardware_concurrency();
  // A mode that forks workers, or (dp) one whose process runs threads.
  if (cores && hogwild::workers_used(cfg.mode, cfg.workers) > cores)
    fmt::print(stderr, "hogwild_train: warning: {} {} on {} cores; they will share cores\n",
               cfg.workers,
               hogwild::is_parallel(cfg.mode) ? std::string("workers") : o.mode + " threads",
               cores);

  if (cfg.huge_pages) {
    const auto hp = hogwild::huge_pages_status(hogwild::ArenaOptions{cfg.shm_dir, true});
    if (!hp.ok) fmt::print(stderr, "hogwild_train: warning: --huge-pages: {}\n", hp.message);
  }

  // No output may overwrite an input or another output (--metrics naming the
  // training file truncated it); --checkpoint replaces the --resume file, as meant.
  // Each is probed too, so a bad path fails before the (possibly long) loading and
  // training.
  hogwild::tools::check_outputs(
      {{"--train", o.train}, {"--test", o.test}, {"--train-labels", o.train_labels},
       {"--test-labels", o.test_labels}, {"--resume", cfg.resume}},
      {{"--metrics", o.metrics, {}, "metrics"},
       {"--summary", o.summary, {}, "the summary"},
       {"--checkpoint", cfg.checkpoint, "--resume", "checkpoints"}},
      std::chrono::milliseconds(static_cast<long long>(o.output_wait * 1000)));

  const bool hot_k = cfg.hot_k > 0 && hogwild::is_parallel(cfg.mode);
  // The linear models step per non-zero: sparse rows serve them to a higher density.
  const double dense_at =
      model->feature_indexed() ? hogwild::kDenseDensityLinear : hogwild::kDenseDensity;
  // A node whose data fails to load tells the nodes waiting to join it.
  auto told = [&](auto&& load_it) {
    try {
      return load_it();
    } catch (const std::exception& e) {
      hogwild::tell_nodes_failed(cfg, e.what());
      throw;
    }
  };
  hogwild::Dataset train =
      told([&] { return load(o.train, o.train_labels, o, storage, dense_at, "train", hot_k); });
  std::optional<hogwild::Dataset> test;
  if (!o.test.empty())
    test = told([&] {
      return load(o.test, o.test_labels, o, storage, dense_at, "test ", hot_k, &train);
    });
  if (!o.quiet)
    fmt::print(o.human, "model {}, mode {}, optimizer {}, {} worker(s), batch {}, lr {}, {} epoch(s)\n",
               cfg.model, o.mode, o.optimizer, hogwild::workers_used(cfg.mode, cfg.workers),
               cfg.batch, cfg.step_size.lr0, cfg.epochs);
  const auto kernel = cfg.device == hogwild::Device::cuda
                          ? std::optional(hogwild::detail::device_kernel_def(cfg.model))
                          : std::nullopt;
  if (!o.quiet && kernel && kernel->warps &&
      hogwild::detail::device_access(cfg.mode) != hogwild::DeviceAccess::gradient) {
    const unsigned warps = hogwild::device_warps_for(
        cfg, train, cfg.model_options.bias && kernel->bias_in_every_example);
    const unsigned all = warps * hogwild::workers_used(cfg.mode, cfg.workers);
    fmt::print(o.human, "device: {} warp(s) a worker process, {} Hogwild! updater(s) in all{}\n", warps,
               all, cfg.device_warps ? "" : " (--device-warps auto)");
    cfg.device_warps = warps;  // resolved once: train() would count the hottest coordinate again
  }
  std::fflush(o.human);

  // Opened (emptied, or appended to by a resumed run) at its first line: a run that
  // fails before, at a typo in a data file or an arena that does not fit, leaves the
  // previous run's metrics as they were.
  std::optional<hogwild::MetricsWriter> metrics;
  if (!o.metrics.empty()) metrics.emplace(o.metrics, !cfg.resume.empty());

  // Erased before every line printed below, and when an error unwinds past it.
  hogwild::tools::ProgressLine live(o.human, !o.quiet);
  auto result = hogwild::train(
      cfg, *model, train, test ? &*test : nullptr,
      [&](const hogwild::Progress& p) {
        live.clear();
        if (metrics) metrics->write(p);
        if (!o.quiet && !p.restart) {
          fmt::print(o.human, "{}\n", hogwild::format_progress(p, cfg.epochs));
          std::fflush(o.human);
        }
      },
      live.active() ? [&](const hogwild::LiveProgress& p) { live.update(p); }
                    : hogwild::LiveCallback(),
      [&](const hogwild::MemoryEstimate& m) {
        if (o.quiet) return;
        fmt::print(o.human, "memory at the peak, estimated: {}\n", m.describe());
        std::fflush(o.human);
      });
  live.clear();
  if (cfg.huge_pages && !result.huge_pages &&
      hogwild::huge_pages_status(hogwild::ArenaOptions{cfg.shm_dir, true}).ok)
    fmt::print(stderr, "hogwild_train: warning: --huge-pages: the system allows them, but the "
                       "kernel mapped the arena on 4 KiB pages (smaps; docs/CLI.md)\n");
  if (!o.summary.empty()) {
    auto summary = nlohmann::json::parse(hogwild::summary_json(cfg, result, o.train, o.test));
    summary["nodes_from"] = nodes_from.nodes;
    summary["node_rank_from"] = nodes_from.node_rank;
    hogwild::write_file_atomically(o.summary, summary.dump(2) + "\n");
  }
  const std::string line = hogwild::result_line(cfg, result);
  fmt::print(o.human, "{}\n", line);
  if (const auto& s = result.staleness; s.every > 0)
    fmt::print(o.human, "staleness: lag p50 {}, p90 {}, p99 {}, max {} (mean {:.2f}); overlap p50 {}, p99 {}, "
               "max {} (mean {:.2f}): examples of the other workers, {} sampled updates\n",
               s.lag.p50, s.lag.p90, s.lag.p99, s.lag.max, s.lag.mean, s.overlap.p50,
               s.overlap.p99, s.overlap.max, s.overlap.mean, s.lag.samples);
  else if (cfg.telemetry)
    fmt::print(o.human, "staleness: not measured (--mode {}{}: the steps do not write the shared weights "
               "themselves)\n", hogwild::to_string(cfg.mode),
               cfg.merge_every ? " with --merge-every" : cfg.hot_k ? " with --hot-k" : "");
  if (const auto& c = result.conflicts; c.measured) {
    fmt::print(o.human, "conflicts: {} of {} sampled writes ({:.3g}%) had another worker's write land inside "
               "them; lost-update mass mean {:.3g}, max {:.3g} over {} coordinates\n",
               c.conflicts, c.writes, 100 * c.conflict_rate, c.lost_mass_mean, c.lost_mass_max,
               c.coordinates.size());
    const std::size_t shown = std::min<std::size_t>(c.coordinates.size(), o.quiet ? 0 : 8);
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& x = c.coordinates[i];
      fmt::print(o.human, "  {:>14} {:<24} {:>10} writes {:>8} conflicts  lost {:.3g}\n", x.what, x.why,
                 x.writes, x.conflicts, x.lost_mass);
    }
  }
  if (result.signal == SIGINT) return hogwild::kExitInterrupted;
  if (result.signal == SIGTERM) return hogwild::kExitTerminated;
  return 0;
}

// --worker-start fork-server or --device cuda (or =...) among the arguments, read before
// the parser runs (it is validated again there).
bool wants_fork_server(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--worker-start=fork-server" || a == "--device=cuda") return true;
    if (a == "--device" && i + 1 < argc && std::string_view(argv[i + 1]) == "cuda") return true;
    if (a == "--worker-start" && i + 1 < argc && std::string_view(argv[i + 1]) == "fork-server")
      return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // First, while this process has no thread and no library state: the fork server
  // that starts the workers of --worker-start fork-server (fork_server.hpp); only
  // when asked for, so that a default run's process tree stays parent + workers.
  try {
    if (wants_fork_server(argc, argv)) hogwild::start_fork_server();
  } catch (const hogwild::Error& e) {
    fmt::print(stderr, "hogwild_train: error: {}\n", e.what());
    return e.exit_code();
  }
  // Past a file-size limit (ulimit -f), write() then fails with EFBIG and the
  // message says which file, instead of the process dying of SIGXFSZ.
  signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const hogwild::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "hogwild_train: error: {}\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "hogwild_train: error: out of memory\n");
    return hogwild::kExitResource;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hogwild_train: error: {}\n", e.what());
    return hogwild::kExitFailure;
  }
}
