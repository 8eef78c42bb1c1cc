// hogwild_train: lock-free parallel SGD across processes that share memory.
//   hogwild_train --train rcv1.svm --test rcv1.t.svm --model logistic
//                 --workers 4 --mode hogwild --epochs 10 --lr 0.5
// prints one progress line per epoch and a summary; exit status 0 on success,
// 2 for bad input or options, 3 when a worker fails, 4 when a resource is short,
// 130/143 when interrupted, 141 when standard output closed under it (docs/CLI.md).
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include "hogwild/config.hpp"
#include "hogwild/arena.hpp"
#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "data/file_io.hpp"
#include "device/kernel_registry.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "modes/mode_def.hpp"
#include "file_roles.hpp"
#include "options.hpp"
#include "progress_line.hpp"

namespace {

// The lines for a person, each written and flushed at once. Standard output closed
// under them (`hogwild_train ... | head`): the first failed write asks the run to
// stop as SIGTERM would (hogwild::request_stop: its checkpoint, summary and model
// are written all the same), the lines after it go nowhere, and the exit status is
// 141, SIGPIPE's; closed before training, the run does not start. SIGPIPE itself is
// ignored, so the process does not die of it with nothing written. Another failure
// (a full disk under a redirection) is the error it was: `cannot write`, exit 2.
bool g_human_gone = false;

// Standard output is a pipe whose reader has gone (poll says POLLERR on its end).
bool stdout_reader_gone() {
  pollfd p{STDOUT_FILENO, 0, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

// A line on stderr, never an exception: with SIGPIPE ignored, fmt::print throws when
// stderr is a closed pipe, and a throw from main's handlers would abort.
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  const std::string text = fmt::format(format, std::forward<Args>(args)...);
  (void)std::fputs(text.c_str(), stderr);
}

template <typename... Args>
void tell(std::FILE* to, fmt::format_string<Args...> format, Args&&... args) {
  if (g_human_gone) return;
  const std::string text = fmt::format(format, std::forward<Args>(args)...);
  if (std::fwrite(text.data(), 1, text.size(), to) == text.size() && std::fflush(to) == 0) return;
  if (errno != EPIPE)
    throw hogwild::IoError(fmt::format("cannot write to {}: {}", to == stdout ? "standard output" :
                                       "standard error", std::strerror(errno)));
  g_human_gone = true;
  hogwild::request_stop(SIGPIPE);
}

// The tool's own options; the training's are hogwild::train_options().
struct Options {
  std::string train, test, train_labels, test_labels;
  std::string metrics, summary;
  std::string config;  // --config FILE, an input outputs may not overwrite
  std::string storage = "auto";
  unsigned threads = 0;
  // Where the lines for a person go: stdout, or stderr when stdout carries JSON
  // (--metrics - or --summary -).
  std::FILE* human = stdout;
  double output_wait = 0;  // seconds
  bool quiet = false;
  bool cleanup = false;
  std::set<std::string> given;  // the training options on the command line, by name
  std::string nodes_from = "default", node_rank_from = "default";  // for the summary
};

// Every training option (hogwild/options.hpp) on the command line, grouped by its
// concern in --help; `given` receives their values.
void add_train_options(CLI::App& app, std::map<std::string, std::string>& given) {
  static const hogwild::TrainConfig defaults;
  for (const auto& o : hogwild::train_options()) {
    if (!o.command_line) continue;
    std::string group = hogwild::to_string(o.concern);
    group[0] = static_cast<char>(std::toupper(group[0]));
    const std::string name = "--" + o.name;
    if (o.value_text.empty()) {
      // --flag, --flag=true or =false, `flag = false` in --config: CLI11 counts a false
      // one as -1 (a callback of the true ones only left `false` with no value).
      app.add_flag_function(name, [&given, n = o.name](std::int64_t count) {
           given[n] = count > 0 ? "true" : "false";
         }, o.help)->group(group);
      continue;
    }
    // The range and the default, where the help does not say them already.
    std::vector<std::string> notes;
    if (!o.range.empty() && o.help.find(o.range) == std::string::npos) notes.push_back(o.range);
    if (const std::string d = o.get(defaults); !d.empty() && o.mode.find(" or ") == std::string::npos &&
                                               o.help.find("default") == std::string::npos)
      notes.push_back("default " + d);
    std::string help = o.help;
    if (!notes.empty()) help += fmt::format(" [{}]", fmt::join(notes, "; "));
    app.add_option(name, given[o.name], help)
        ->option_text(o.value_text)
        ->group(group)
        ->multi_option_policy(CLI::MultiOptionPolicy::Throw);  // given twice: refused
  }
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
  const std::size_t nnz = hogwild::nonzeros(d);  // an image's, not rows x columns
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
  // (An evaluation of nothing would print no accuracy, and exit 0.)
  if (d.rows() == 0)
    throw hogwild::ConfigError(fmt::format("{} {} has no rows: nothing to {}", train ? "--test" : "--train",
                                           path, train ? "evaluate on" : "train on"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.quiet)
    tell(o.human, "{} {}: {} rows, {} features, {} non-zeros ({:.2f}s), stored {}{}{}\n", what, path,
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

// Standard input holds one file: two of the inputs named `-` are refused (IDX
// images and their labels have a message of their own, where they are read).
void one_standard_input(const std::vector<std::string>& args) {
  std::string first;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string option = args[i], value = i + 1 < args.size() ? args[i + 1] : "";
    if (const auto eq = option.find('='); option.starts_with("--") && eq != std::string::npos)
      value = option.substr(eq + 1), option = option.substr(0, eq);
    if (value != "-" || (option != "--config" && option != "--train" && option != "--test" &&
                         option != "--resume" && option != "--init-from"))
      continue;
    if (!first.empty())
      throw hogwild::ConfigError(fmt::format(
          "{} - and {} - both read standard input: give one of them a file", first, option));
    first = option;
  }
}

// --config - (or a pipe): its text read now into an anonymous memory file, which
// every later reader (the fork server's check, CLI11) opens as /proc/self/fd/N.
void config_from_stream(std::vector<std::string>& args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    // The path: the next argument, or what follows "--config=" (both forms, as
    // config_path reads them); rewritten in place.
    std::string* path = args[i] == "--config" && i + 1 < args.size() ? &args[i + 1] : nullptr;
    std::string inline_path;
    if (args[i].starts_with("--config=")) inline_path = args[i].substr(9), path = &inline_path;
    if (path == nullptr || !hogwild::detail::is_stream(*path)) continue;
    const std::string text = hogwild::detail::read_stream(*path, hogwild::detail::stream_name(*path));
    *path = fmt::format("/proc/self/fd/{}",
                        hogwild::detail::memory_file(text, "--config " + *path, true));
    if (path == &inline_path) args[i] = "--config=" + inline_path;
  }
}

// The --config FILE among the arguments ("" if none), read before the parser runs.
std::string config_path(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--config" && i + 1 < argc) path = argv[i + 1];
    if (a.starts_with("--config=")) path = std::string(a.substr(9));
  }
  return path;
}

// --config FILE, before CLI11 reads it: every training option takes one value, and
// CLI11 reads a list cut short ("lr = [1,2") as its first item. A list is refused,
// naming FILE:LINE.
void check_config_file(int argc, char** argv) {
  const std::string path = config_path(argc, argv);
  if (path.empty()) return;
  std::ifstream in(path);
  std::size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const auto value = line.find_first_not_of(" \t", eq + 1);
    if (value != std::string::npos && line[value] == '[')
      throw hogwild::ConfigError(fmt::format(
          "{}:{}: an option takes one value, not a list: {}", path, number, line));
  }
}

// The command line into cfg and o; a number: exit with it now (--help, --version,
// --cleanup, a parse error).
std::optional<int> parse_command_line(int argc, char** argv, hogwild::TrainConfig& cfg, Options& o) {
  CLI::App app{"Lock-free parallel SGD (Hogwild!) across processes that share memory.\n"
               "Workers are forked processes; the model's parameters live in one shared-memory\n"
               "segment that they update without locks (or as --mode says).",
               "hogwild_train"};
  app.get_formatter()->column_width(34);
  app.set_version_flag("--version", std::string("hogwild_train ") + HOGWILD_VERSION);
  // A run written down: every option by its name, as TOML (lr = 0.5, no-bias = true)
  // or INI; the command line wins over the file.
  app.set_config("--config", "", "Read options from FILE (TOML or INI: lr = 0.5); the command "
                 "line wins")->option_text("FILE");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a key no option has: refused
  app.footer(
      "Exit status: 0 done; 1 an internal error; 2 bad input or options; 3 a worker failed; "
      "4 short of memory, shared memory or disk; 130, 143 or 129 stopped by SIGINT, SIGTERM or SIGHUP "
      "(the final checkpoint and summary written).\n"
      "Example: hogwild_train --train rcv1.svm --test rcv1.t.svm --workers 4 --epochs 10 "
      "--lr 0.5 --summary run.json");
  app.add_option("--train", o.train,
                 "Training data: libsvm/svmlight text, MNIST IDX images, rating triples "
                 "(user item rating [timestamp]: MovieLens u.data, ratings.csv), or a binary cache "
                 "(hogwild_data convert); .gz is read transparently")->option_text("FILE");
  app.add_option("--test", o.test, "Test data, same formats; evaluated after every epoch")->option_text("FILE");
  app.add_option("--train-labels", o.train_labels,
                 "IDX labels file for --train (default: the images path with "
                 "images-idx3 replaced by labels-idx1)")->option_text("FILE");
  app.add_option("--test-labels", o.test_labels, "IDX labels file for --test")->option_text("FILE");
  std::map<std::string, std::string> given;
  add_train_options(app, given);
  const std::string tool = "Data and outputs";
  app.add_option("--metrics", o.metrics, "Write one JSON object per evaluation to FILE")
      ->option_text("FILE")->group(tool);
  app.add_option("--summary", o.summary, "Write the run's summary as one JSON object to FILE")
      ->option_text("FILE")->group(tool);
  app.add_option("--output-wait", o.output_wait,
                 "Seconds to wait for another run that writes one of this run's outputs to end, "
                 "before refusing (exit 2); hogwild_sweep gives 60")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str()->option_text("S")->group(tool);
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
  check_config_file(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A wrong option or value, said as every other error is.
    warn("hogwild_train: error: {} (see --help)\n", e.what());
    return hogwild::kExitBadInput;
  } catch (const std::logic_error&) {  // (std::invalid_argument, std::out_of_range)
    // CLI11 reads a flag's value (--digest=maybe) with std::stoll, which throws.
    std::string which = "a flag's value (given in --config?)";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto eq = arg.find('=');
      if (!arg.starts_with("--") || eq == std::string::npos) continue;
      for (const auto& option : hogwild::train_options())
        if (option.value_text.empty() && arg.substr(2, eq - 2) == option.name)
          which = fmt::format("--{} {}", option.name, arg.substr(eq + 1));
    }
    warn("hogwild_train: error: {}: a flag takes true or false (or 1 and 0, yes and no, on and off) "
         "(see --help)\n", which);
    return hogwild::kExitBadInput;
  }
  for (const auto& option : hogwild::train_options()) {
    if (!option.command_line || !app.count("--" + option.name)) continue;
    o.given.insert(option.name);
    try {
      option.set(cfg, given[option.name]);
    } catch (const hogwild::ConfigError& e) {  // a value the option does not take
      throw hogwild::ConfigError(std::string(e.what()) + " (see --help)");
    }
  }

  if (o.cleanup && !o.train.empty())  // (it cleaned up and exited 0, training nothing)
    throw hogwild::ConfigError("--cleanup removes what dead runs left and exits: run it apart "
                               "from training (no --train)");
  if (o.cleanup) {
    auto removed = hogwild::cleanup_stale_segments();
    for (auto& n : removed) fmt::print("removed /dev/shm/{}\n", n);
    fmt::print("{} stale segment(s) removed\n", removed.size());
    for (auto& d : hogwild::cleanup_stale_rendezvous())
      fmt::print("removed {}, a dead run's Gloo rendezvous folder\n", d);
    // And the temporaries a killed writer left beside the outputs named with it.
    for (const std::string* out : {&cfg.checkpoint, &o.summary, &o.metrics, &cfg.save_model}) {
      if (out->empty() || *out == "-") continue;
      const auto target = hogwild::detail::output_target(*out);
      if (target.kind != hogwild::detail::OutputTarget::Kind::replace) continue;
      if (const std::size_t n = hogwild::detail::remove_stale_temporaries(target.path))
        fmt::print("removed {} stale temporar{} of {}\n", n, n == 1 ? "y" : "ies", *out);
    }
    return 0;
  }
  return std::nullopt;
}

// What the options ask of this process before any data is read: standard output for
// JSON alone, the launcher's node count, the fork server for a GPU; then validated.
void prepare(hogwild::TrainConfig& cfg, Options& o) {
  if (o.train.empty()) throw hogwild::ConfigError("--train is required (see --help)");
  // Standard output, however named (-, /dev/stdout, a link to /proc/self/fd/1).
  using hogwild::detail::is_stdout;
  const int on_stdout = is_stdout(o.metrics) + is_stdout(o.summary) + is_stdout(cfg.save_model);
  if (on_stdout > 1)
    throw hogwild::ConfigError("--metrics, --summary and --save-model would mix on standard "
                               "output: give all but one a file");
  if (on_stdout) o.human = stderr;  // stdout: that output alone
  if (!cfg.checkpoint.empty() && hogwild::detail::output_target(cfg.checkpoint).kind ==
                                     hogwild::detail::OutputTarget::Kind::stream)
    throw hogwild::ConfigError(fmt::format(
        "--checkpoint {}: a checkpoint is a file that each save replaces whole; give a path",
        cfg.checkpoint));
  const NodesFrom nodes_from = nodes_from_launcher(cfg, o.given.count("nodes") > 0,
                                                  o.given.count("node-rank") > 0);
  o.nodes_from = nodes_from.nodes;
  o.node_rank_from = nodes_from.node_rank;
  if (cfg.eval_every > 0 && o.test.empty())  // (train() says so too, but after the data is read)
    throw hogwild::ConfigError(fmt::format("--eval-every {} evaluates the weights on the test set: "
                                           "give --test", cfg.eval_every));
  cfg.handle_signals = true;  // SIGINT/SIGTERM: final checkpoint and summary, exit 130/143
  cfg.result_parameters = false;  // the weights go to the checkpoint only: no copy at the end
  if (cfg.device == hogwild::Device::cuda) {
    // CUDA does not survive fork: GPU workers start from the fork server, which
    // main started before anything else (wants_fork_server).
    if (o.given.count("worker-start") && cfg.worker_start == hogwild::WorkerStart::fork)
      throw hogwild::ConfigError("--device cuda starts its workers from the fork server (CUDA "
                                 "does not survive fork): leave out --worker-start fork");
    cfg.worker_start = hogwild::WorkerStart::fork_server;
    // Before the data is read: a machine without a GPU says so at once.
    const hogwild::CudaStatus gpu = hogwild::cuda_status();
    if (!gpu.ok) throw hogwild::ConfigError("no CUDA device: " + gpu.message);
  }
  cfg.validate();
}

// Warnings for options that this run ignores or that the machine cannot honour,
// and the outputs checked against the inputs; a fresh model (a bad name fails here).
std::unique_ptr<hogwild::Model> check_run(const hogwild::TrainConfig& cfg, const Options& o) {
  // Segments a crashed run of ours left behind (its name lives only microseconds).
  for (auto& n : hogwild::cleanup_stale_segments())
    warn("hogwild_train: removed /dev/shm/{}, left by a dead run\n", n);
  if (cfg.comm == "gloo")
    for (auto& d : hogwild::cleanup_stale_rendezvous())
      warn("hogwild_train: removed {}, a dead run's Gloo rendezvous folder\n", d);
  auto model = hogwild::make_model(cfg.model, cfg.model_options);  // fail fast on a bad name
  if (hogwild::workers_used(cfg.mode, cfg.workers) < cfg.workers)
    warn("hogwild_train: warning: --mode {} trains with one worker; --workers {} is ignored\n",
               hogwild::to_string(cfg.mode), cfg.workers);
  // A model's own options given to another model are said, not silently dropped
  // (a warning: a sweep may pass one to every model it runs).
  for (const auto& [option, owner] : {std::pair{"--rank", "mf"}, std::pair{"--hidden", "mlp"}})
    if (o.given.count(option + 2) && cfg.model != owner)
      warn("hogwild_train: warning: {} applies to --model {} only; --model {} ignores it\n",
                 option, owner, cfg.model);
  // An instrument's or the nodes' setting without what it sets (the simulated mode
  // reports what --telemetry's and --conflicts' samples would see without them).
  const bool simulated = hogwild::detail::mode_def(cfg.mode).simulated();
  for (const auto& [option, needs, on] :
       {std::tuple{"telemetry-every", "--telemetry", cfg.telemetry || simulated},
        std::tuple{"conflict-k", "--conflicts", cfg.conflicts || simulated},
        std::tuple{"join-timeout", "--nodes 2 or more", cfg.nodes > 1},
        std::tuple{"run-id", "--nodes 2 or more", cfg.nodes > 1}})
    if (o.given.count(option) && !on)
      warn("hogwild_train: warning: --{} applies with {}; this run ignores it\n", option, needs);
  const unsigned cores = std::thread::hardware_concurrency();
  // A mode that forks workers, or (dp) one whose process runs threads.
  if (cores && hogwild::workers_used(cfg.mode, cfg.workers) > cores &&
      !hogwild::detail::mode_def(cfg.mode).simulated())
    warn("hogwild_train: warning: {} {} on {} cores; they will share cores\n",
               cfg.workers,
               hogwild::is_parallel(cfg.mode) ? std::string("workers")
                                            : fmt::format("{} threads", hogwild::to_string(cfg.mode)),
               cores);

  if (cfg.huge_pages) {
    const auto hp = hogwild::huge_pages_status(hogwild::ArenaOptions{cfg.shm_dir, true});
    if (!hp.ok) warn("hogwild_train: warning: --huge-pages: {}\n", hp.message);
  }

  // No output may overwrite an input or another output (--metrics naming the
  // training file truncated it); --checkpoint replaces the --resume file, as meant.
  // Each is probed too, so a bad path fails before the (possibly long) loading and
  // training.
  // The inputs include those read without being named on the command line: the
  // --config file, the cost model, IDX labels found beside the images.
  std::vector<hogwild::tools::FileRole> inputs{
      {"--train", o.train}, {"--test", o.test}, {"--train-labels", o.train_labels},
      {"--test-labels", o.test_labels}, {"--resume", cfg.resume}, {"--init-from", cfg.init_from},
      {"--config", o.config}, {"--cost-model", cfg.cost_model}};
  for (const auto& r : hogwild::tools::labels_beside("--train-labels (found beside --train)",
                                                     o.train, o.train_labels))
    inputs.push_back(r);
  for (const auto& r : hogwild::tools::labels_beside("--test-labels (found beside --test)",
                                                     o.test, o.test_labels))
    inputs.push_back(r);
  hogwild::tools::check_outputs(
      inputs,
      {{"--metrics", o.metrics, {}, "metrics"},
       {"--summary", o.summary, {}, "the summary"},
       {"--checkpoint", cfg.checkpoint, "--resume", "checkpoints"},
       {"--save-model", cfg.save_model, {}, "the model"}},
      std::chrono::milliseconds(static_cast<long long>(o.output_wait * 1000)));
  return model;
}

// The summary file, the result line, and what the instruments measured.
void report(const hogwild::TrainConfig& cfg, const Options& o, const hogwild::TrainResult& result) {
  if (cfg.huge_pages && !result.huge_pages &&
      hogwild::huge_pages_status(hogwild::ArenaOptions{cfg.shm_dir, true}).ok)
    warn("hogwild_train: warning: --huge-pages: the system allows them, but the "
                       "kernel mapped the arena on 4 KiB pages (smaps; docs/CLI.md)\n");
  if (!o.summary.empty()) {
    auto summary = nlohmann::json::parse(hogwild::summary_json(cfg, result, o.train, o.test));
    summary["nodes_from"] = o.nodes_from;
    summary["node_rank_from"] = o.node_rank_from;
    try {
      hogwild::write_file_atomically(o.summary, hogwild::detail::json_text(summary, 2) + "\n");
    } catch (const hogwild::IoError&) {  // --summary - | head, the reader gone: 141, as the lines
      if (o.summary != "-" || !stdout_reader_gone()) throw;
      g_human_gone = true;
    }
  }
  const std::string line = hogwild::result_line(cfg, result);
  tell(o.human, "{}\n", line);
  if (const auto& s = result.staleness; s.every > 0)
    tell(o.human, "staleness: lag p50 {}, p90 {}, p99 {}, max {} (mean {:.2f}); overlap p50 {}, p99 {}, "
               "max {} (mean {:.2f}): examples of the other workers, {} sampled updates\n",
               s.lag.p50, s.lag.p90, s.lag.p99, s.lag.max, s.lag.mean, s.overlap.p50,
               s.overlap.p99, s.overlap.max, s.overlap.mean, s.lag.samples);
  else if (cfg.telemetry)
    tell(o.human, "staleness: not measured (--mode {}{}: the steps do not write the shared weights "
               "themselves)\n", hogwild::to_string(cfg.mode),
               cfg.merge_every ? " with --merge-every" : cfg.hot_k ? " with --hot-k" : "");
  if (const auto& c = result.conflicts; c.measured && cfg.mode == hogwild::Mode::simulated) {
    tell(o.human, "conflicts (exact, every write): {} of {} writes ({:.3g}%) had another worker's store "
               "land inside them; lost-update mass {:.3g} a write\n",
               c.conflicts, c.writes, 100 * c.conflict_rate, c.lost_mass_mean);
  } else if (const auto& c = result.conflicts; c.measured) {
    tell(o.human, "conflicts: {} of {} sampled writes ({:.3g}%) had another worker's write land inside "
               "them; lost-update mass mean {:.3g}, max {:.3g} over {} coordinates\n",
               c.conflicts, c.writes, 100 * c.conflict_rate, c.lost_mass_mean, c.lost_mass_max,
               c.coordinates.size());
    const std::size_t shown = std::min<std::size_t>(c.coordinates.size(), o.quiet ? 0 : 8);
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& x = c.coordinates[i];
      tell(o.human, "  {:>14} {:<24} {:>10} writes {:>8} conflicts  lost {:.3g}\n", x.what, x.why,
                 x.writes, x.conflicts, x.lost_mass);
    }
  }
}

int run(int argc, char** argv) {
  hogwild::TrainConfig cfg;
  Options o;
  if (const auto exit_now = parse_command_line(argc, argv, cfg, o)) return *exit_now;
  o.config = config_path(argc, argv);
  prepare(cfg, o);
  const hogwild::Storage storage = hogwild::parse_storage(o.storage);
  auto model = check_run(cfg, o);

  const bool hot_k = (cfg.hot_k > 0 || cfg.layout == hogwild::WeightLayout::hot) &&
                     hogwild::is_parallel(cfg.mode);
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
  // One class for a binary model (a wrong label column, a shard of one class): it
  // trains, and scores 100 %. (A scan that stops at the first other label.)
  const auto labels = train.labels();
  if (!labels.empty() && std::all_of(labels.begin(), labels.end(),
                                     [&](float y) { return y == labels[0]; })) {
    try {  // (labels that do not fit the model: train() says so, telling the other nodes)
      if (hogwild::LabelMap::fit(model->label_kind(), train, cfg.model).kind() ==
          hogwild::LabelKind::binary)
        warn("hogwild_train: warning: every label in {} is {}: the model learns one class, and "
             "its accuracy says nothing\n", o.train == "-" ? "standard input" : o.train, labels[0]);
    } catch (const hogwild::ConfigError&) {
    }
  }
  if (!o.quiet)
    tell(o.human, "model {}, mode {}, optimizer {}, {} worker(s), batch {}, lr {}, {} epoch(s)\n",
               cfg.model, hogwild::to_string(cfg.mode), hogwild::to_string(cfg.optimizer), hogwild::workers_used(cfg.mode, cfg.workers),
               cfg.batch, cfg.step_size.lr0, cfg.epochs);
  if (!o.quiet && cfg.mode == hogwild::Mode::hogwild) {
    // What writes the shared weights: given, implied, or the probe's to choose.
    hogwild::TrainConfig shown = cfg;  // as train() resolves it
    hogwild::detail::mark_replicas_unsound(shown, *model, train);
    tell(o.human, "{}\n",
               hogwild::detail::layout_plan(shown, hogwild::workers_used(cfg.mode, cfg.workers),
                                            train));
  }
  const auto kernel = cfg.device == hogwild::Device::cuda
                          ? std::optional(hogwild::detail::device_kernel_def(cfg.model))
                          : std::nullopt;
  if (!o.quiet && kernel && kernel->warps &&
      hogwild::detail::device_access(cfg.mode) != hogwild::DeviceAccess::gradient) {
    const unsigned warps = hogwild::device_warps_for(
        cfg, train, cfg.model_options.bias && kernel->bias_in_every_example);
    const unsigned all = warps * hogwild::workers_used(cfg.mode, cfg.workers);
    tell(o.human, "device: {} warp(s) a worker process, {} Hogwild! updater(s) in all{}\n", warps,
               all, cfg.device_warps ? "" : " (--device-warps auto)");
    cfg.device_warps = warps;  // resolved once: train() would count the hottest coordinate again
  }
  if (g_human_gone) {  // closed before training: nothing to stop, nothing trained
    warn("hogwild_train: standard output closed before training; not started\n");
    return hogwild::kExitPipe;
  }

  // Opened (emptied, or appended to by a resumed run) at its first line: a run that
  // fails before, at a typo in a data file or an arena that does not fit, leaves the
  // previous run's metrics as they were.
  std::optional<hogwild::MetricsWriter> metrics;
  if (!o.metrics.empty()) metrics.emplace(o.metrics, !cfg.resume.empty());
  std::string metrics_full;  // the error of a metrics write that found its disk full

  // Erased before every line printed below, and when an error unwinds past it.
  hogwild::tools::ProgressLine live(o.human, !o.quiet);
  bool layout_told = false;  // --layout auto: the probe's choice, printed once known
  auto result = hogwild::train(
      cfg, *model, train, test ? &*test : nullptr,
      [&](const hogwild::Progress& p) {
        live.clear();
        if (metrics && !metrics->reader_gone() && metrics_full.empty()) {
          try {
            metrics->write(p);
          } catch (const hogwild::IoError&) {  // --metrics - | head: as the lines, a stop
            if (!metrics->reader_gone()) throw;
            hogwild::request_stop(SIGPIPE);
          } catch (const hogwild::ResourceError& e) {
            // Its disk full: a stop, so that the final checkpoint and summary (on
            // another disk, or in what the stop frees) keep the training done; exit 4.
            metrics_full = e.what();
            hogwild::request_stop(SIGXFSZ);
          }
        }
        if (!o.quiet && !p.layout.empty() && !layout_told) {
          tell(o.human, "{}\n", p.layout);
          layout_told = true;
        }
        if (!o.quiet && !p.restart) tell(o.human, "{}\n", hogwild::format_progress(p, cfg.epochs));
      },
      live.active() ? [&](const hogwild::LiveProgress& p) { live.update(p); }
                    : hogwild::LiveCallback(),
      [&](const hogwild::MemoryEstimate& m) {
        if (o.quiet) return;
        tell(o.human, "memory at the peak, estimated: {}\n", m.describe());
      });
  live.clear();
  report(cfg, o, result);
  if (result.signal == SIGINT || result.signal == SIGTERM || result.signal == SIGHUP)
    return 128 + result.signal;  // (130, 143, 129: kExitInterrupted, kExitTerminated, a shell's)
  if (result.signal == SIGPIPE || g_human_gone) return hogwild::kExitPipe;
  if (!metrics_full.empty()) {
    warn("hogwild_train: error: {}\n", metrics_full);
    return hogwild::kExitResource;
  }
  return 0;
}

// --worker-start fork-server or --device cuda (or =...) among the arguments, read before
// the parser runs (it is validated again there).
bool wants_fork_server(int argc, char** argv) {
  // A --config file saying so (device = "cuda", worker-start = "fork-server").
  if (const std::string path = config_path(argc, argv); !path.empty()) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      std::erase_if(line, [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\''; });
      if (line == "device=cuda" || line == "worker-start=fork-server" ||
          line == "worker_start=fork-server")
        return true;
    }
  }
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

int main(int argc_given, char** argv_given) {
  hogwild::tools::reopen_closed_standard_streams();  // (before any descriptor is opened)
  std::vector<std::string> args(argv_given, argv_given + argc_given);
  std::vector<char*> argv_now;
  // First, while this process has no thread and no library state: the fork server
  // that starts the workers of --worker-start fork-server (fork_server.hpp); only
  // when asked for, so that a default run's process tree stays parent + workers.
  try {
    one_standard_input(args);
    config_from_stream(args);
    for (auto& a : args) argv_now.push_back(a.data());
    argv_now.push_back(nullptr);
    if (wants_fork_server(argc_given, argv_now.data())) hogwild::start_fork_server();
  } catch (const hogwild::Error& e) {
    warn("hogwild_train: error: {}\n", e.what());
    return e.exit_code();
  }
  // Past a file-size limit (ulimit -f), write() then fails with EFBIG and the
  // message says which file, instead of the process dying of SIGXFSZ.
  signal(SIGXFSZ, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);  // a closed standard output: tell() stops the run instead
  try {
    return run(argc_given, argv_now.data());
  } catch (const hogwild::Error& e) {
    std::fflush(stdout);
    warn("hogwild_train: error: {}\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    warn("hogwild_train: error: out of memory\n");
    return hogwild::kExitResource;
  } catch (const std::exception& e) {
    warn("hogwild_train: error: {}\n", e.what());
    return hogwild::kExitFailure;
  }
}
