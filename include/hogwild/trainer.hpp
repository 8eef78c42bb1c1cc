// The trainer: places the model's parameters in the arena, forks N workers that
// each train their share of every epoch's rows, supervises them, evaluates
// the live weights while they run, and removes everything on the way out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/memory_estimate.hpp"
#include "hogwild/mode.hpp"
#include "hogwild/model.hpp"
#include "hogwild/model_options.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/step_size.hpp"
#include "hogwild/telemetry.hpp"

namespace hogwild {

// Which rows each worker trains in an epoch (src/trainer/epoch_order.hpp):
// shuffled: one permutation of all rows per epoch, drawn from (seed, epoch), split
// among the workers (as DistributedSampler; a file sorted by class or user costs no
// accuracy); contiguous: worker k keeps the k-th slice of the file's rows and
// shuffles inside it (for locality experiments).
enum class Partition : std::uint8_t { shuffled, contiguous };
const char* to_string(Partition p) noexcept;
Partition parse_partition(const std::string& name);  // ConfigError on anything else

// How hogwild's workers share out an epoch's rows (--balance): steal (each worker
// starts on its own share; one that has finished every epoch takes half of what is
// left of the slowest share, so that all end together) or fixed ("static": each
// worker trains its share and nothing else, and the run ends with the slowest).
// src/trainer/work_share.hpp.
enum class Balance : std::uint8_t { steal, fixed };
const char* to_string(Balance b) noexcept;  // "steal", "static"
Balance parse_balance(const std::string& name);  // ConfigError on anything else

// How hogwild's workers write the shared weights (--layout): plain (every update in
// place), hot (each worker's own copy of the hot coordinates: --hot-k, K from the
// data's degree table), replicas (a private replica merged every few thousand
// examples: --merge-every auto), or automatic: with several workers and a linear
// model on sparse rows, a probe at the start of the run times updates on the shared
// weights against the same updates on a replica and keeps replicas unless they cost
// clearly more (src/modes/hogwild/layout_probe.hpp).
enum class WeightLayout : std::uint8_t { automatic, plain, hot, replicas };
const char* to_string(WeightLayout l) noexcept;  // "auto", "plain", "hot", "replicas"
WeightLayout parse_weight_layout(const std::string& name);  // ConfigError on anything else

struct TrainConfig {
  std::string model = "logistic";
  ModelOptions model_options{};
  Mode mode = Mode::hogwild;
  // The options a mode declares, by name (striped's "stripes"): --<name> on the
  // command line; a mode's declared fallback where absent.
  std::map<std::string, std::int64_t> mode_options;
  Optimizer optimizer = Optimizer::sgd;  // AdaGrad's accumulators live in the arena too
  unsigned workers = 1;     // serial always uses 1 (the parent itself)
  Partition partition = Partition::shuffled;
  unsigned epochs = 10;
  StepSize step_size{};
  std::size_t batch = 1;
  // Replicated Hogwild! (replica.hpp), modes hogwild and atomic with sgd: each
  // worker trains a private copy of the parameters and adds its change to the shared
  // ones every merge_every of its examples and at the end of each epoch. 0: off, every
  // update goes straight to the shared weights. kMergeAuto (--merge-every auto): each
  // worker times its merges and its examples and keeps a merge at about 5 % of its
  // time (Replica::kAuto).
  static constexpr std::size_t kMergeAuto = static_cast<std::size_t>(-1);
  std::size_t merge_every = 0;
  // Hot coordinates (models that are Model::feature_indexed, sparse rows, parallel
  // modes, SGD): each worker trains its own copy of the bias and of the hot_k
  // features most frequent in the training rows, and adds what it changed to the
  // shared weights every hot_flush examples and at the end of each epoch
  // (HOGWILD++/DimmWitted-style replication of the coordinates every example
  // touches, whose cache lines otherwise bounce between cores;
  // src/modes/hogwild/hot_window.hpp). 0: off. kFlushAuto (--hot-flush auto, the
  // default): each worker times its flushes and keeps them at about 5 % of its time,
  // as kMergeAuto does its merges.
  std::size_t hot_k = 0;
  static constexpr std::size_t kFlushAuto = static_cast<std::size_t>(-1);
  std::size_t hot_flush = kFlushAuto;
  // --layout (mode hogwild): replicas sets merge_every to kMergeAuto and hot sets hot_k
  // from the degree table when the run starts, unless given; automatic probes.
  WeightLayout layout = WeightLayout::automatic;
  // Not an option: set as the run starts, in every process (resolve_layout, from the
  // model and the rows), where --layout auto may not choose replicas. Then it is
  // plain, with no probe (modes/hogwild/layout_probe.hpp, replicas_sound).
  bool replicas_unsound = false;
  // --balance (mode hogwild): steal unless the run cannot (work_share.hpp: no_steal).
  Balance balance = Balance::steal;
  // --mode ps (a parameter server, Downpour): `servers` server processes each own a
  // slice of every tensor; each worker (a replica) pushes its accumulated updates
  // every push_every mini-batches and fetches the weights every fetch_every; with
  // staleness >= 0 a replica more than that many pushes ahead of the slowest waits
  // (0: bulk-synchronous; -1: no bound). hashed_keys: each server owns the
  // coordinates whose hash says so (--key-ranges hashed) instead of a contiguous
  // slice.
  unsigned servers = 1;
  std::size_t push_every = 1;
  std::size_t fetch_every = 1;
  long staleness = -1;
  bool hashed_keys = false;
  // --mode simulated: the access the virtual workers' writes have (hogwild, atomic
  // or lock), and a JSON file of the cost model's figures ("": the built-in ones;
  // src/modes/simulated/simulator.hpp, docs/EXPERIMENTS.md).
  std::string simulate_access = "hogwild";
  std::string cost_model;
  // --mode ddp: the gradients of `accumulate` mini-batches are combined before one
  // update (PyTorch's no_sync); the reduction goes in buckets of bucket_bytes after
  // a first one of 1 MiB (0: 25 MiB, PyTorch's default); a worker waiting longer
  // than comm_timeout seconds for the others fails, naming them.
  unsigned accumulate = 1;
  std::size_t bucket_bytes = 0;
  double comm_timeout = 10;
  // --mode ddp: the workers' Communicator, "shm" (the arena) or "gloo" (TCP over
  // loopback, a FileStore in a directory of the run's: for comparison).
  std::string comm = "shm";
  // --mode ddp on several machines (docs/DISTRIBUTED.md): `nodes` machines, each
  // running this program with `workers` workers and its own node_rank; they meet
  // through `rendezvous` ("file:DIR" on a directory every node shares, or
  // "redis://HOST:PORT"), and their workers of the same local rank add up their
  // slices over Gloo's TCP pairs on interface `iface`. run_id names the run in the
  // store (default: from the options and the data), so that two runs never meet.
  unsigned nodes = 1;
  unsigned node_rank = 0;
  std::string rendezvous;
  std::string iface;
  std::string run_id;
  // Several nodes: how long each node's parent waits for the others to join before
  // any worker starts (a node may start that much later than the first; torchrun's
  // rendezvous default). Nodes started with other options or data are refused as
  // soon as they meet. Without `iface`, the nodes talk over the interface whose
  // network reaches the others (loopback on one machine).
  double join_timeout = 300;
  // Hogwild across nodes (modes hogwild, atomic, lock with nodes > 1): worker 0 of
  // each node adds the other nodes' changes to its node's weights every sync_every
  // of its examples, or about every sync_seconds (one of the two is 0), and at each
  // epoch's end (modes/hogwild/node_sync.hpp).
  std::size_t sync_every = 0;
  double sync_seconds = 0;
  // Measure the staleness of the workers' updates (hogwild/telemetry.hpp), 1 in
  // telemetry_every updates on average (modes that write the shared weights
  // directly: hogwild, atomic, lock, serial; not replicas or the hot window).
  bool telemetry = false;
  unsigned telemetry_every = 64;
  // Watch the writes to a sample of the weights' coordinates: the bias, the top
  // conflict_k features by degree and conflict_k random ones (hogwild/telemetry.hpp;
  // modes hogwild, atomic, lock, serial; every write then goes one coordinate at a
  // time).
  bool conflicts = false;
  std::size_t conflict_k = 16;
  // Controlled experiments: grad_delay_ns of busy work per example inside each
  // update (the Hogwild! paper's Fig. 5c: held under the lock in lock mode), and
  // worker straggler_worker (-1: none) making each of its updates
  // straggler_factor times as long as it took.
  std::uint64_t grad_delay_ns = 0;
  int straggler_worker = -1;
  double straggler_factor = 1;
  std::uint64_t seed = 1;
  double eval_every = 0;    // seconds between evaluations during an epoch; 0: per epoch only
  std::string shm_dir;      // file-backed arena in this directory instead of /dev/shm
  bool pin = false;         // pin worker k to the (k mod n)-th CPU it may run on
  bool huge_pages = false;  // ask for 2 MiB pages for the arena (ArenaOptions::huge_pages)
  unsigned max_restarts = 3;  // crashed workers respawned per run before it fails
  // Seconds a worker may go without finishing an example, while it runs, before the
  // run says so (naming it, where it was and for how long) and kills it: respawned
  // under max_restarts, else the run fails (WorkerError, exit 3). A worker stopped
  // (SIGSTOP, a debugger) or stuck was waited for in silence. 0 = off. Modes whose
  // workers wait for each other (ddp, ps) and runs across nodes have their own
  // timeouts (comm_timeout) instead.
  double stall_timeout = 600;
  std::string checkpoint;     // write checkpoints to this file (at the end, when stopped,
  double checkpoint_every = 0;  // and every this many seconds; 0: only then)
  std::string resume;         // continue from this checkpoint
  // Write the trained model to this file at the end (and when stopped by a signal;
  // with `checkpoint`, beside each checkpoint too): safetensors with what predicting
  // needs (model_file.hpp); "-": standard output, at the end only.
  std::string save_model;
  // Start from the weights of this model file (--save-model's) instead of the
  // initialisation: ConfigError when its model or tensor shapes are not this run's.
  std::string init_from;
  // Copy the final weights (and AdaGrad's state) into TrainResult::parameters and
  // optimizer_state: one more copy of the weights at the end of the run, beside the
  // arena's. A program that keeps them only in the checkpoint (the CLI) turns it
  // off; the checkpoint is written from the arena either way.
  bool result_parameters = true;
  // --digest: the final weights' SHA-256 into TrainResult::weights_sha256 (over every
  // tensor, src/trainer/weights_digest.hpp): about 3 ms a MB of weights without the
  // CPU's SHA instructions, so off unless asked.
  bool digest_weights = false;
  // Install SIGINT/SIGTERM/SIGHUP handlers in this process for the run (the CLI asks;
  // one the process ignores stays ignored): the
  // first signal stops the workers after their batch and train() returns with the
  // weights at the stop (TrainResult::signal); a second exits at once. Off, the
  // embedding program's handlers stay as they are. Workers, the library's own
  // processes, always end their batch on SIGTERM (a process-group kill) and exit 143.
  bool handle_signals = false;
  // How workers start (fork_server.hpp): plain fork of this process, or through the
  // fork server (start_fork_server() must have run; the model must be registered).
  WorkerStart worker_start = WorkerStart::fork;
  // Where the parameters live and the steps run (device.hpp): the CPU's shared arena,
  // or a CUDA GPU's memory shared by every worker (docs/GPU.md), which needs workers
  // started from the fork server (CUDA does not survive fork) and a GPU; without one
  // the run fails with ConfigError "no CUDA device: <what the driver said>".
  Device device = Device::cpu;
  CudaIpc cuda_ipc = CudaIpc::vmm;  // how workers share device memory (device == cuda)
  // --device cuda, the MLP: streams per worker process, each training every K-th
  // mini-batch on the shared weights (Hogwild! workers inside the process; the
  // other models' launches fill the device with warps already).
  unsigned device_streams = 1;
  // --device cuda: warps per worker process, each a Hogwild! worker looping over
  // examples (the concurrent updaters of the shared weights: their number is the
  // staleness). 0 = auto (device_warps_for). Lock and serial modes use 1: the lock
  // takes the updates one at a time, so more warps would only spin on it.
  unsigned device_warps = 0;
  // (Each field is an option, declared once: hogwild/options.hpp.)
  // Throws ConfigError naming the first invalid field.
  void validate() const;
};

// One evaluation (after an epoch, or every eval_every seconds), stamped with when
// the weights it scores were captured, not when the parent got round to them:
// workers write while the weights are copied, so the copy holds the updates of
// between samples_min and samples_max examples (equal when no worker wrote during
// the copy; their difference is the evaluation's own staleness).
struct Progress {
  double time = 0;           // seconds of training when the weights were captured
  double epoch = 0;          // epochs completed by all workers (fractional for timed evals)
  std::uint64_t samples = 0; // examples whose updates the evaluated weights hold: the
                             // middle of [samples_min, samples_max]
  std::uint64_t samples_min = 0, samples_max = 0;
  std::vector<std::uint64_t> worker_samples_min, worker_samples_max;  // the same, per worker
  double train_loss = 0;     // mean progressive loss of the last completed epoch
  Evaluation test{};         // on the test set (NaN fields when there is none)
  double samples_per_second = 0;  // samples / time (a resumed run: this process's share)
  // Examples per second since the previous evaluation: with evaluations per epoch,
  // the epoch's own pace (the progress line's rate).
  double recent_samples_per_second = 0;
  double eval_seconds = 0;   // wall time of the evaluation itself
  double reported_time = 0;  // seconds of training when the evaluation was done: how far
                             // the parent is behind the workers is reported_time - time
  bool end_of_epoch = true;
  // An epoch's line scored on the live weights, later than the epoch's end: no
  // snapshot of it was kept (its slot was still held, the workers having run ahead
  // of the parent; or a worker died as it finished). `samples` says how much later.
  bool late = false;
  bool restart = false;      // the weights a restart starts from, not progress: the CLI
                             // prints no line for it (its message says so), --metrics has one
  unsigned restarts = 0;     // workers respawned so far
  // --telemetry: the staleness measured so far (all epochs), run-wide.
  Quantiles lag, overlap;
  // --mode simulated: the simulated clock's seconds when the weights were captured
  // (all epochs); negative for every other mode.
  double simulated_time = -1;
  // --layout auto: what the probe chose, once every worker has (a line for the CLI;
  // empty before, and for a layout that was not probed).
  std::string layout;
};

// --device cuda: the warps each worker process runs, each a Hogwild! worker
// (TrainConfig::device_warps, resolved). Lock and serial: 1. Otherwise the value
// given, or with 0 (auto) as many as keep the hottest coordinate's expected
// concurrent writers at about kDeviceWritersPerCoordinate over all workers: every
// warp holds one example, and a coordinate that a fraction D of the examples write
// then meets about warps x workers x D writers at once, the staleness its updates
// see (a 16-core CPU's worst case is 16). Bias coordinates, written by every example,
// count under atomic (their updates add up) and not under hogwild (they overwrite:
// the later write wins). Between kDeviceWarpsMin and kDeviceWarpsMax in all.
// Measured on an H200 (docs/GPU.md): with every warp the device holds resident
// (16,896 for two processes) sparse LR at lr 0.5 reached 0.73 against the CPU's
// 0.80, and atomic diverged.
inline constexpr double kDeviceWritersPerCoordinate = 16;
inline constexpr unsigned kDeviceWarpsMin = 16, kDeviceWarpsMax = 1u << 14;
unsigned device_warps_for(const TrainConfig& config, const Dataset& train_set, bool bias);

struct TrainResult {
  double train_seconds = 0;
  // The wall time of the train() call: train_seconds and the run's fixed cost
  // around it (the arena, the workers' start and end, the result's copy, the
  // outputs the run writes); loading the data before the call is not in it.
  double run_seconds = 0;
  // Several nodes: seconds this node waited for the others to join (not training
  // time: train_seconds and samples_per_second leave it out).
  double join_seconds = 0;
  std::string iface;  // several nodes: the interface they talked over ("": loopback)
  std::uint64_t samples = 0;
  double samples_per_second = 0;
  double nnz_per_second = 0;
  Evaluation test{};        // final weights on the test set
  double train_loss = 0;    // last epoch's mean progressive loss
  // The whole process tree's peak from the start of training, measured: its
  // processes' anonymous and shared-memory pages, shared ones once (the parent
  // samples them, src/trainer/memory_meter.hpp); and what was estimated of it before
  // the first epoch.
  std::uint64_t peak_rss_bytes = 0;
  MemoryEstimate memory_estimate;
  unsigned lock_recoveries = 0;      // lock mode: mutex recovered from a dead owner
  bool huge_pages = false;           // the arena got huge pages (config.huge_pages honoured)
  std::vector<Progress> history;
  // Final weights and AdaGrad's accumulators, by tensor name (empty when
  // TrainConfig::result_parameters is off).
  std::map<std::string, std::vector<float>> parameters;
  std::map<std::string, std::vector<float>> optimizer_state;
  // TrainConfig::digest_weights: SHA-256 of the final weights, lower-case hex (the
  // bytes: src/trainer/weights_digest.hpp); empty when not asked.
  std::string weights_sha256;
  std::size_t classes = 0;
  unsigned restarts = 0;             // crashed workers respawned
  unsigned device_warps = 0;         // --device cuda: warps a worker process ran (resolved)
  // 0, or SIGINT/SIGTERM/SIGHUP when a signal stopped the run (request_stop's: SIGPIPE for a
  // closed standard output, SIGXFSZ for an output whose disk is full): the result then holds the
  // weights and counters at the stop (test = an evaluation of those weights) and
  // the final checkpoint, if configured, was written. train() returns normally.
  int signal = 0;
  std::uint32_t resumed_epochs = 0;  // epochs the resumed checkpoint had completed
  // Replicas (merge_every): merges by all workers, and the examples between merges
  // the workers ended with, averaged (with kMergeAuto, what the timing chose).
  std::uint64_t merges = 0;
  double merge_every = 0;
  // Hot coordinates (--hot-k, --layout hot, or the probe's hot window): flushes by
  // all workers, and the examples between flushes the workers ended with, averaged.
  std::uint64_t flushes = 0;
  double flush_every = 0;
  // --layout: what the workers wrote the shared weights with ("plain", "hot",
  // "replicas"), and why: the option that set it, the probe's verdict, or why there
  // was no probe. probed: the figures the run's decision was made from (ns an example
  // straight to the shared weights, and on a replica with its merges), and each
  // worker's layout ("none": it ended before it took the decision).
  struct LayoutChoice {
    std::string chosen, why;
    bool probed = false;
    double shared_ns = 0, replica_ns = 0;
    double hot_ns = 0;                    // 0: hot coordinates were not among the choices
    unsigned windows = 0;                 // probe windows measured, all workers
    std::vector<std::string> workers;     // each worker's choice
  } layout;
  // --balance: "steal" or "static", why (the option, or why the run could not
  // steal), and the rows the workers took from others' shares, all epochs.
  std::string balance, balance_why;
  std::uint64_t stolen_rows = 0;
  // Hogwild across nodes: this node's syncs with the others and the seconds its
  // worker 0 spent in them (the others trained on meanwhile).
  std::uint64_t node_syncs = 0;
  double node_sync_seconds = 0;
  // ... and the staleness they add: the mean examples the other nodes trained
  // between two syncs, which this node sees only at the second (measured).
  double node_sync_lag_examples = 0;
  // --telemetry: the staleness of the sampled updates (every = 0: not measured).
  Staleness staleness;
  // --conflicts: the sampled coordinates' conflicts and lost-update mass.
  Conflicts conflicts;
  // --mode ps, measured: the replicas' pushes and fetches; the staleness as each push
  // started (how many pushes the replica was ahead of the slowest replica still
  // training: at most --staleness) and at each fetch (one more at most, the push
  // just made); the bytes pushed, the seconds replicas spent pushing (the bound's
  // waits and full rings included), and the records and coordinates each server
  // applied (its load: with contiguous slices the popular low feature ids weigh on
  // server 0). The
  // examples lost with replicas that died: trained, not yet pushed (each is trained
  // again by the respawned replica). Across nodes: this node's servers' rounds and
  // the bytes they sent to the other nodes.
  struct ParameterServer {
    std::uint64_t pushes = 0, fetches = 0, bytes = 0, max_staleness = 0, max_push_staleness = 0;
    double mean_staleness = 0, mean_push_staleness = 0, push_seconds = 0;
    std::vector<std::uint64_t> server_records, server_keys;
    std::uint64_t lost_examples = 0, rounds = 0, network_bytes = 0;
  } ps;
  // --mode simulated: the simulated seconds of all epochs, the updates and the
  // coordinates written, the writes another worker's store overwrote and the size of
  // the changes lost so (exact: also in `staleness` and `conflicts`), and where the
  // costs came from.
  struct Simulation {
    // On the simulated clock, and the counters below: this process's part of the
    // run (a resumed run's clock starts again; the checkpoint holds no events).
    double seconds = 0;
    std::uint64_t examples = 0;  // simulated here: examples / seconds is the rate
    std::uint64_t updates = 0, writes = 0, lost_writes = 0;
    std::uint64_t moves = 0;  // writes that moved their line from another worker
    double lost_mass = 0;
    // The costs it ran with, by name (idle_ns, example_ns, read_ns, write_ns,
    // coherence_ns in ns; recent_writes; queue 1 or 0), and the workers' speed
    // factors (modes/simulated/simulator.hpp).
    std::map<std::string, double> costs;
    std::vector<double> speed;
    // What the sampling instruments would have reported on this schedule, beside
    // the exact figures above and in staleness: --telemetry's sample of the
    // updates (telemetry_every, sampled_updates, sampled_lag_mean, _p50, _p99, _max,
    // sampled_overlap_mean, _p99) and --conflicts' sample of the coordinates
    // (conflict_coordinates, conflict_writes, conflict_conflicts).
    std::map<std::string, double> instruments;
  } simulation;
};

// Called in the parent for every evaluation, in order.
using ProgressCallback = std::function<void(const Progress&)>;

// Where a run stands between evaluations, from the workers' progress records (which
// they publish every 64 mini-batches): what a live display needs.
struct LiveProgress {
  double time = 0;                  // seconds of training since this process started it
  std::uint64_t samples = 0;        // examples processed, all workers and epochs (a
                                    // resumed run's earlier ones included)
  std::uint64_t total = 0;          // examples of the whole run: rows * epochs
  std::uint64_t epoch_samples = 0;  // examples of the current epoch done
  std::uint64_t epoch_rows = 0;     // examples in an epoch (the training rows)
  unsigned epochs_done = 0;         // epochs completed by all workers (the current one
  unsigned epochs = 0;              // is epochs_done + 1, of `epochs`)
  double epoch_time = 0;            // seconds since the current epoch began
  double rate = 0;                  // examples per second over the last few seconds
};

// Called in the parent about every 100 ms while an epoch runs, never at the same
// time as the ProgressCallback. In serial mode it is called from a thread the
// parent runs beside the epoch's loop (joined before the epoch's evaluation).
using LiveCallback = std::function<void(const LiveProgress&)>;

// Called once in the parent, before any worker starts and after the memory check
// passed, with the estimate of the run's peak memory (memory_estimate.hpp).
using StartCallback = std::function<void(const MemoryEstimate&)>;

// Several nodes (config.nodes > 1): says this node's failure (`why`) to the nodes
// waiting to join it, which then stop at once instead of at --join-timeout. train()
// does so itself; a program that fails before calling it (its data, its options)
// calls this. Never throws; takes about a second (the others look every 20 ms).
void tell_nodes_failed(const TrainConfig& config, const std::string& why) noexcept;

// Asks the run in progress in this process to stop as a first SIGINT or SIGTERM
// does (workers end their batch; train() then returns with the weights at the stop,
// its final checkpoint and model written, TrainResult::signal = `signal`): from a
// progress callback, whose output has nowhere to go (hogwild_train's standard
// output closed under it: SIGPIPE; its --metrics file's disk full: SIGXFSZ); from the start callback, it stops the run before
// its first batch. Says so on stderr. Nothing when one is already stopping.
void request_stop(int signal) noexcept;

// Trains `config.model` (from the registry) on `train`; `test` may be null.
// Failures throw (error.hpp): a worker that crashed more than max_restarts times
// (WorkerError), divergence (Error naming epoch and step; no checkpoint is written
// from non-finite weights), a checkpoint that does not match (ConfigError), a full
// disk or too little memory (ResourceError). SIGINT/SIGTERM do not throw: see
// TrainResult::signal.
TrainResult train(const TrainConfig& config, const Dataset& train, const Dataset* test,
                  const ProgressCallback& on_progress = {}, const LiveCallback& on_live = {},
                  const StartCallback& on_start = {});
// Same with a model object the caller built (a user-defined model).
TrainResult train(const TrainConfig& config, Model& model, const Dataset& train,
                  const Dataset* test, const ProgressCallback& on_progress = {},
                  const LiveCallback& on_live = {}, const StartCallback& on_start = {});

}  // namespace hogwild
