// What the trainer asks of a mode (include/hogwild/mode.hpp names it). A mode is a
// folder here whose mode.cpp defines a ModeDef, plus one line in HOGWILD_BUILTIN_MODES
// (mode.hpp); the trainer reads these answers instead of testing which mode it
// runs, and what the mode does around the steps is its epoch part
// (trainer/epoch_part.hpp).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.hpp"
#include "hogwild/arena.hpp"
#include "hogwild/device_kernel.hpp"
#include "hogwild/memory_space.hpp"
#include "hogwild/mode.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"
#include "device/device_steps.hpp"
#include "memory/robust_mutex.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild::detail {

// An option a mode declares: --<name> on the command line, mode_options[name] in
// TrainConfig (and so in the worker description and the summary's "mode_options").
struct ModeOption {
  std::string name;  // "stripes"
  std::int64_t low = 0, high = 0, fallback = 0;  // its range, and its value when not given
  std::string help;
  bool resume_must_match = false;  // a checkpoint made with another value is refused
};
// striped mode's --stripes, which --mode simulated shares (--simulate-access striped).
ModeOption stripes_option();
// The stripes of `n` that batch `b` takes (feature j in stripe j mod n; a dense row:
// every stripe), into `out`: ascending, each once (one order for every worker).
void batch_stripes(const Batch& b, std::size_t n, std::vector<std::uint32_t>& out);

// What a mode's arena blocks are sized from, in the parent (and again, to find
// them, in a worker started from a description).
struct ModeArena {
  const TrainConfig& config;
  std::span<const TensorSpec> specs;  // the model's tensors
  unsigned workers;                   // this node's worker processes
};

// What a mode's part of a worker's step loop is made from, in the worker process.
// The first four are all a part that only locks needs; the rest are the worker's
// (absent where a test makes a part alone).
struct ModeWorker {
  const TrainConfig& config;
  unsigned rank;
  const ParamSet& params;  // the shared weights
  Arena& arena;            // the run's: the mode's blocks by name (arena_blocks)
  Model* model = nullptr;  // this worker's, configured for `problem`
  const Problem* problem = nullptr;
  const Dataset* train = nullptr;  // the training rows
  const std::atomic<std::int32_t>* stop = nullptr;  // the run's stop flag
  // This worker's group of the node's workers (a new one at each call: the arena's
  // "comm" block, or Gloo over loopback) ...
  std::function<std::unique_ptr<Communicator>()> communicator = {};
  // ... and with several nodes its group of the same local rank on every node, the
  // join already checked (null with one node).
  std::function<std::unique_ptr<Communicator>()> across = {};
  unsigned world = 1;  // workers on every node
  // --device cuda: the group of every rank of the run on the device (NCCL's, where
  // the device backend has one; else the run's own over host memory).
  std::function<std::unique_ptr<Communicator>()> device_communicator = {};
  // What hogwild's options need (modes/hogwild/writer_parts.hpp), as the parent
  // prepared it: --hot-k's hot features, this worker's window and the rows with
  // those features renumbered into it (null: off; under --layout auto, the probe's
  // third choice where it has one); the rows whose coordinates this
  // worker's steps can change, [first, second) (its slice, or every row under a
  // shuffled partition); across nodes, the base of the leaders' deltas, and a wait
  // until this node's other workers finished the leader's epoch (false: the run
  // stopped first).
  const std::vector<std::uint32_t>* hot = nullptr;
  float* hot_window = nullptr;
  const Dataset* hot_rows = nullptr;
  std::pair<std::size_t, std::size_t> own_rows = {};
  // ... and the coordinates of each tensor those rows can change, where the parent
  // found them (Model::trained_ranges; null: the worker finds them)
  const std::vector<Ranges>* row_ranges = nullptr;
  const ParamSet* node_base = nullptr;
  std::function<bool()> others_done = {};
};

struct EpochTask;  // trainer/step_loop.hpp

class ModeDef {
 public:
  virtual ~ModeDef() = default;
  virtual std::string_view name() const = 0;
  // What it does, for --help: "lock-free".
  virtual std::string_view summary() const = 0;
  // The access policy its steps are compiled with: access_index<P>() of a policy in
  // HOGWILD_ACCESS_POLICIES (include/hogwild/update_policy.hpp).
  virtual std::uint8_t access() const = 0;
  // Its steps write the shared weights themselves, not a gradient that a sync, its
  // threads or its servers apply (access() is not GradientCapture's): the writes
  // --telemetry and --conflicts watch.
  bool steps_write_weights() const;
  // False: the calling process alone trains (one worker, nothing forked).
  virtual bool parallel() const { return true; }
  // --merge-every: workers may train private replicas merged into the shared
  // weights; atomic_merges: those merges add with one atomic read-modify-write per
  // coordinate (else a relaxed load and store; a hot window's flushes always do).
  virtual bool replicas() const { return false; }
  virtual bool atomic_merges() const { return false; }
  // Whether a run of `config` with `workers` workers on this node may keep replicas
  // (--merge-every, or hogwild's --layout auto probe): the parent then finds the
  // coordinates every row can change once, before the workers start
  // (ModeWorker::row_ranges), where each worker would find them in its own time.
  virtual bool may_merge(const TrainConfig& config, unsigned /*workers*/) const {
    return replicas() && config.merge_every != 0;
  }
  // The workers step together: each step's gradients are combined over all of them
  // through a Communicator (modes/ddp/gradient_sync.hpp) before one update. Every
  // worker then sees every step's rows in the same count, a worker that dies stops
  // the run (a lone respawn would be out of step), and no merge or hot window
  // applies.
  virtual bool synchronous() const { return false; }
  // Each worker gets rows / workers of each epoch's one order, dealt in turn as
  // DistributedSampler deals them (trainer's Run::rows_of), so that the workers'
  // b-th mini-batches together are serial's b-th of workers times the rows.
  virtual bool deals_rows() const { return false; }
  // Across nodes its workers meet the other nodes' in its own collectives (ddp's
  // all-reduce, ps's server rounds); false: hogwild's node sync, each node's first
  // worker averaging the weights with the other nodes' (--sync-every).
  virtual bool joins_nodes() const { return false; }
  // Its workers wait for one another (collectives, a staleness bound): one whose
  // count of examples stands still may be waiting, not stuck, so --stall-timeout
  // does not watch them.
  virtual bool workers_wait() const { return false; }
  // One process (not parallel()) whose mini-batches are split among `workers`
  // threads, each with a model of its own made by name (modes/dp/data_parallel.hpp).
  virtual bool threaded() const { return false; }
  // One process (not parallel()) that simulates `workers` workers on a clock of its
  // own (modes/simulated): none is forked, and its train_epoch runs them.
  virtual bool simulated() const { return false; }
  // Trains the calling process's epoch itself instead of the step loop
  // (trainer/step_loop.hpp): returns the epoch's summed loss, having published the
  // place reached in task.progress; nullopt: the step loop trains it.
  virtual std::optional<double> train_epoch(Model&, const EpochTask&, const ModeWorker&) const {
    return std::nullopt;
  }
  // Where its parameters live (trainer/tensor_store.hpp): the CPU modes train the
  // shared arena; a GPU mode would name device memory.
  virtual MemorySpace space() const { return MemorySpace::host_shared; }
  // How its steps write the weights under --device cuda; none: the mode does not
  // run on a GPU (--device cuda refuses it, naming those that do).
  virtual std::optional<DeviceAccess> device_access() const { return std::nullopt; }
  // What each worker keeps for it beyond the model's step buffers, for the memory
  // estimate (trainer/memory_plan.hpp): its bytes, and what they are ("gradient").
  struct Keeps {
    std::uint64_t bytes = 0;
    std::string what;
  };
  virtual Keeps worker_keeps(const ModeArena&) const { return {}; }
  // The hot features (among tensor 0's first `features`) of a window the parent maps
  // for the mode's own parts where no option asked for one (hogwild: --layout auto's
  // third choice), from the training rows; empty: none. The parent makes it as
  // --hot-k's (modes/hogwild/hot_window.hpp).
  virtual std::vector<std::uint32_t> own_hot_features(const TrainConfig&, unsigned /*workers*/,
                                                      const Dataset& /*train*/,
                                                      std::size_t /*features*/) const {
    return {};
  }
  // Worker `rank` died and is respawned alone: what its death lost, for the line that
  // says so (" (...)"; ps: the updates since its last push, also counted).
  virtual std::string worker_died(Arena&, unsigned /*rank*/) const { return {}; }
  // Once every worker ended, its figures from its blocks into the result (ps: pushes,
  // fetches, staleness).
  virtual void collect(Arena&, TrainResult&) const {}
  // ... and what its workers chose as they went, from their progress records
  // (hogwild's --layout auto): into the result once they ended, and while they run
  // a line for the progress the CLI prints, once there is one (else empty).
  virtual void collect_workers(const TrainConfig&, std::span<const WorkerProgress>,
                               TrainResult&) const {}
  virtual std::string progress_note(const TrainConfig&, std::span<const WorkerProgress>) const {
    return {};
  }
  // A clock of the mode's own, in seconds so far, for each evaluation
  // (Progress::simulated_time; simulated: the simulated clock).
  virtual std::optional<double> clock(Arena&) const { return std::nullopt; }
  // Its part of the run's summary: what it adds to the JSON (summary_json), and to
  // the line the CLI ends with (result_line: ", ..."). Nothing by default.
  virtual void summarize(const TrainConfig&, const TrainResult&, nlohmann::json&) const {}
  virtual std::string result_text(const TrainConfig&, const TrainResult&) const { return {}; }

  // ConfigError for what it refuses of the run's other options (its own are checked
  // against their declarations first).
  virtual void check(const TrainConfig&) const {}
  // The options it declares (ModeOption), each read with mode_option().
  virtual std::vector<ModeOption> options() const { return {}; }
  // The TrainConfig fields that are its options (ps's --servers), declared with
  // src/options/kinds.hpp; train_options() lists them, refused under another mode.
  virtual std::vector<OptionInfo> config_options() const { return {}; }
  // The blocks its workers share in the run's arena, beside the run's own ...
  virtual void arena_blocks(const ModeArena&, std::vector<BlockSpec>&) const {}
  // ... set up by the parent before any worker starts, and again when a group of
  // workers restarts together (ddp: its communicator's region).
  virtual void init_blocks(const ModeArena&, Arena&) const {}
  // Processes it runs beside the workers, ranks workers .. workers + n - 1 (ps: its
  // servers), and the body of the one at `index` (0-based).
  virtual unsigned services(const TrainConfig&) const { return 0; }
  virtual void serve(const ModeWorker&, unsigned /*index*/) const {}
  // Its parts of each worker's step loop (trainer/epoch_part.hpp), made once in each
  // worker process, in the order they act after each batch: make_part's by default
  // (the modes whose workers write the weights add hogwild's options' parts).
  virtual void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const {
    if (auto part = make_part(w)) parts.push_back(std::move(part));
  }
  // Its part of the device path's epoch (--device cuda) over `steps`, this worker's
  // kernels; null: the plain launches.
  virtual std::unique_ptr<DevicePart> make_device_part(const ModeWorker&, DeviceSteps&) const {
    return nullptr;
  }
  // Its one part of each worker's step loop; null: none.
  virtual std::unique_ptr<EpochPart> make_part(const ModeWorker&) const { return nullptr; }
};

// The value of option `name` of cfg's mode: the one given, else its fallback.
std::int64_t mode_option(const TrainConfig& cfg, const std::string& name);
// Every option some mode declares, with the names of the modes that do ("striped").
struct DeclaredModeOption {
  ModeOption option;
  std::string modes;
};
std::vector<DeclaredModeOption> declared_mode_options();
// Whether `modes` ("ps", "hogwild or atomic": DeclaredModeOption::modes) names m.
bool mode_takes(const std::string& modes, Mode m);
// ConfigError for a mode option cfg's mode does not declare, or out of its range.
void check_mode_options(const TrainConfig& cfg);

// The registered mode `m` (registry.cpp).
const ModeDef& mode_def(Mode m);
// The names of the registered modes for which (def.*has)() is true, joined for a
// message: "hogwild or atomic".
std::string mode_names_where(bool (ModeDef::*has)() const);
std::string mode_names_where(const std::function<bool(const ModeDef&)>& has);
// The device access of mode `m` under --device cuda (none: it does not run there).
std::optional<DeviceAccess> device_access(Mode m);
// "a, b or c".
std::string join_or(const std::vector<std::string>& names);

}  // namespace hogwild::detail
