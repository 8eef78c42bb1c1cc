// One training run's shared state, set up by the parent before any fork: the arena
// (parameters, per-worker progress, epoch losses, snapshot slots), and the worker
// body. A worker's place is entirely in its WorkerProgress record, so a crashed
// worker can be respawned — or a run resumed from a checkpoint — and continue its
// share where it stopped: epoch e's order is recomputed from the seed, e and the
// worker's rank (epoch_order.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hogwild/arena.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/memory_estimate.hpp"
#include "hogwild/error.hpp"
#include "hogwild/model_base.hpp"
#include "memory/robust_mutex.hpp"
#include "hogwild/trainer.hpp"
#include "modes/mode_def.hpp"
#include "comm/gloo.hpp"
#include "comm/communicator.hpp"
#include "trainer/staleness.hpp"
#include "modes/hogwild/hot_window.hpp"
#include "trainer/progress.hpp"
#include "device/device_steps.hpp"
#include "trainer/tensor_store.hpp"

namespace hogwild::detail {

// The trainer's control block in the arena.
struct Control {
  std::atomic<std::int32_t> stop{0};
  std::int64_t start_ns = 0;  // steady clock (CLOCK_MONOTONIC: the same in every process)
  std::int32_t parent = 0;    // the parent's pid: workers stop when it is gone
  // A synchronous mode: how many groups of workers have started (a restart of the
  // whole group starts a new one, with a communicator of its own), and with
  // --comm gloo the directory of their FileStore rendezvous.
  std::uint32_t generation = 0;
  char rendezvous[256] = {};
  // Several nodes: the interface their workers talk over (--iface, or the one the
  // join chose; empty: loopback, all nodes on one machine).
  char iface[64] = {};
  // What the first worker that stopped on bad input (exit 2: options the other
  // nodes do not share, a rank taken, ...) said, for the parent's error: claimed
  // (1), then written (2).
  std::atomic<std::uint32_t> bad_input_state{0};
  char bad_input[512] = {};
  // Likewise the first worker that lost a peer on another machine (PeerUnreachable:
  // a cut link, a node down): the group is not restarted, as it would wait again.
  std::atomic<std::uint32_t> unreachable_state{0};
  char unreachable[768] = {};
  // The first worker that a collective of this node's waited for until the timeout
  // (CommError::waited_for), and the worker that waited; -1: none. The parent blames
  // it, not the worker that timed out.
  std::atomic<std::int32_t> waited_for{-1};
  std::atomic<std::int32_t> waiter{-1};
  // The training set's fingerprint, made once by the parent for every worker (a
  // fork server's workers do not inherit the parent's memory): ready when 1.
  DataFingerprint fingerprint;
  std::atomic<std::uint32_t> fingerprint_ready{0};
};

// What a copy of the weights holds, read around the copy (WorkerProgress): per
// worker, the examples whose updates are surely in it (`low`, its samples before)
// and those that may be (`high`, its begun after), and when it was taken (seconds
// since training started, the middle of the copy).
struct CaptureCounts {
  std::vector<std::uint64_t> low, high;
  double time = 0;
};

// The weights as they were when the last worker finished an epoch, copied by that
// worker so that each epoch's evaluation is exact however late the parent gets to
// it, and no worker waits. The slots take the epochs in turn (snapshot_slots: two
// for a large model, up to kMaxSlots for a small one, whose epochs are short); a
// slot is reused only after the parent has consumed it (otherwise that epoch is
// evaluated on the live weights, and its line says so: Progress::late).
// The slot's CaptureCounts: `time` here, the per-worker counts in Run::slot_counts.
inline constexpr unsigned kMaxSlots = 32;
// The slots for a model of `floats` floats: as many as 8 MiB hold, from 2 to kMaxSlots.
// (A 50-feature model's epochs of 400 rows last 0.1 ms: eight ended between two
// looks of the parent, and six of them were scored on the final weights.)
inline unsigned snapshot_slots(std::size_t floats) noexcept {
  const std::size_t fit = (std::size_t{8} << 20) / std::max<std::size_t>(floats * sizeof(float), 1);
  return static_cast<unsigned>(std::clamp<std::size_t>(fit, 2, kMaxSlots));
}

struct alignas(64) SnapshotSlot {
  std::atomic<std::uint32_t> epoch{0};     // 1-based epoch held; 0 = free
  std::atomic<std::uint32_t> consumed{1};  // set by the parent after evaluating
  bool filled = false;                     // a whole copy was taken once
  double time = 0;                         // seconds since start when taken
};

std::int64_t now_ns() noexcept;

// Index of the first NaN or Inf of p[0, n), or n (vectorised).
std::size_t first_non_finite(const float* p, std::size_t n) noexcept;
// A non-finite value in a ParamSet: "w[17] = nan".
std::optional<std::string> find_non_finite(const ParamSet& p);
// "training diverged in epoch 3 at step 1234 (...): <what>; try a smaller --lr".
Error divergence(const TrainConfig& c, const std::string& what, double epoch,
                 std::uint64_t samples);

// One worker's record as one publication left it (a seqlock read: retried while
// the worker writes it); samples = epoch * share + position. `losses`: the
// worker's per-epoch losses, copied for the epochs done (or null).
WorkerState read_record(const WorkerProgress& p, const double* losses, std::uint64_t share);

// The problem a model is configured for: the training set's layout and width (the
// test set's too), classes, users and items, the mean target of a regression.
Problem make_problem(const Dataset& train, const Dataset* test, const LabelMap& labels);

// Several nodes, no --run-id: the run's generation is the first whose first group
// not every node joined before (run_groups.cpp).
std::uint32_t first_free_generation(const TrainConfig& cfg, unsigned first_rank);

struct Run {
  const TrainConfig& cfg;
  const ModeDef& mode;
  Model& model;
  const Dataset& train;
  const Dataset* test;
  std::vector<float> train_targets, test_targets;
  // The training set's fingerprint (every row hashed), made at its first use, or
  // taken from the control block where the parent published it (publish_fingerprint,
  // before any worker starts, when the workers need it: the node check).
  const DataFingerprint& data_fingerprint() const {
    std::call_once(fingerprint_once_, [this] {
      if (control && control->fingerprint_ready.load(std::memory_order_acquire))
        fingerprint_ = control->fingerprint;
      else
        fingerprint_ = DataFingerprint::of(train);
    });
    return fingerprint_;
  }
  void publish_fingerprint() {
    control->fingerprint = data_fingerprint();
    control->fingerprint_ready.store(1, std::memory_order_release);
  }
  mutable std::once_flag fingerprint_once_;
  mutable DataFingerprint fingerprint_;
  Problem problem;  // what the model was configured with
  std::vector<TensorSpec> specs;
  Arena arena;
  Control* control = nullptr;
  std::span<WorkerProgress> progress;
  std::span<double> epoch_loss;  // [worker * epochs + epoch]
  std::span<std::atomic<std::uint32_t>> finishers;  // workers done with each epoch
  std::vector<SnapshotSlot*> slots;  // snapshot_slots of them; none without a test set
  unsigned slot_count = 0;           // ... as the arena's blocks were planned
  std::vector<ParamSet> slot_params;
  std::vector<std::span<std::uint64_t>> slot_counts;  // per slot: low[workers], then high[workers]
  // Without a test set (nothing to evaluate, so no slots): the counts as the last
  // worker to finish each of the latest kEpochEnds epochs took them, so that the
  // epoch's record says where it ended however late the parent looks (short epochs
  // end several to one look: their records all said the run's end, at 0 samples/s).
  // An entry of epoch_stride() words: its epoch (1-based; 0 while written), the
  // time's bits, low[workers], high[workers]; written and read as a seqlock.
  static constexpr unsigned kEpochEnds = 16;
  std::span<std::uint64_t> epoch_ends;
  std::size_t epoch_stride() const noexcept { return 2 + 2 * std::size_t{workers}; }
  // Per tensor, the coordinates training can change (Model::trained_ranges over all
  // rows) that the evaluation reads (the same over the test rows), coalesced into
  // whole lines; empty = all: what a snapshot copies (a slot's first snapshot copies
  // everything; the rest never changes or is never read). SpamAssassin: 2^20
  // hashed features, of which training writes 61k and the test rows read fewer.
  // Computed when there is a test set.
  std::vector<Ranges> evaluated_ranges;
  // The same over all rows, not coalesced, where every worker's replica would merge
  // them (ModeDef::may_merge, rows shuffled among the workers): found once here,
  // before the run's clock starts (ModeWorker::row_ranges). Else empty.
  std::vector<Ranges> row_ranges;
  // --hot-k (parallel modes), or the mode's own window (ModeDef::own_hot_features:
  // --layout auto's third choice): the hot features, the training rows with each hot
  // feature renumbered to its slot in the window past w's end (modes/hogwild/hot_window.hpp),
  // and the window (mapped private in the parent before any fork).
  std::vector<std::uint32_t> hot;
  std::optional<Dataset> hot_train;
  float* hot_window = nullptr;
  // ... whose pages the parent maps to the arena's own again as the run ends, so that
  // its segment can be kept for the next run (ArenaOptions::reuse).
  struct SharedAgain {
    Arena* arena = nullptr;
    std::size_t bytes = 0;
    float* at = nullptr;
    SharedAgain() = default;
    SharedAgain(const SharedAgain&) = delete;
    SharedAgain& operator=(const SharedAgain&) = delete;
    ~SharedAgain() {
      if (at) arena->map_shared_again(reinterpret_cast<std::byte*>(at), bytes);
    }
  } window_shared_again;
  std::unique_ptr<TensorStore> store;
  // --comm gloo: the parent's rendezvous directory, removed with the run.
  struct OwnedDir {
    std::string path;
    int lock = -1;  // its `owner` file, locked (cleanup_stale_rendezvous)
    OwnedDir() = default;
    OwnedDir(const OwnedDir&) = delete;
    OwnedDir& operator=(const OwnedDir&) = delete;
    ~OwnedDir();
  } rendezvous_dir;
  // Several nodes: once the run ends (in the parent), the keys of every group
  // that this node's workers joined are erased from cfg.rendezvous, the other
  // nodes' too (gloo_erase_run).
  struct AcrossKeys {
    const Run* run = nullptr;
    std::uint32_t first_generation = 0;
    AcrossKeys() = default;
    AcrossKeys(const AcrossKeys&) = delete;
    AcrossKeys& operator=(const AcrossKeys&) = delete;
    ~AcrossKeys();
  } across_keys;
  // This worker's communicator for the current group (the arena's "comm" block,
  // or Gloo over loopback), and with several nodes its group of the workers of
  // the same local rank on every node (Gloo through cfg.rendezvous).
  std::unique_ptr<Communicator> make_communicator(unsigned rank) const;
  std::unique_ptr<Communicator> make_across(unsigned rank) const;
  // --device cuda --mode ddp across nodes over host memory (a stand-in backend):
  // every rank of every node in one Gloo group.
  GlooOptions world_options(std::uint32_t generation) const;
  GlooOptions across_options(unsigned rank, std::uint32_t generation) const;
  // The workers of all nodes (a synchronous mode), and worker `rank`'s place among them.
  unsigned world() const noexcept { return workers * cfg.nodes; }
  // --comm-timeout: what every collective and rendezvous waits at most.
  std::chrono::milliseconds comm_timeout() const noexcept {
    return std::chrono::milliseconds(static_cast<std::int64_t>(cfg.comm_timeout * 1000));
  }
  unsigned global_rank(unsigned rank) const noexcept { return cfg.node_rank * workers + rank; }
  // What every node must agree on: the options (config_fingerprint) and the
  // training data, as text.
  std::string join_text() const;
  // The values training starts from (after a restore), before any worker starts:
  // hogwild across nodes' base (the arena's "node_base" block, for the leader's
  // NodeSync) and --conflicts' starting values of its sampled coordinates.
  void capture_start();
  ParamSet node_base;
  // Meets the other nodes' workers of this local rank: the first collective of a
  // group compares join_text's fingerprint (ConfigError naming a node that differs).
  void check_join(Communicator& across) const;
  // Several nodes, in the parent before any worker starts: the nodes meet
  // (gloo_join_nodes, up to cfg.join_timeout), refusing any that differs, and the
  // interface the workers talk over is chosen (control->iface). False when a stop
  // came while waiting. The seconds it waited: join_seconds.
  bool join_nodes();
  double join_seconds = 0;
  GlooOptions join_options() const;
  ParamSet params;  // the live tensors, in store->space()
  // --telemetry: each worker's staleness histograms (the arena's "staleness" block).
  std::span<StalenessRecord> staleness;
  unsigned workers = 1;
  unsigned servers = 0;  // --mode ps: server processes, ranks workers .. workers + servers - 1
  std::size_t classes = 0;
  LabelMap labels;  // fitted on the training set
  // The state of the worker process this is: made in the worker on its first
  // epoch, so private to it; never made in the parent (except in serial mode,
  // where the parent is the worker).
  struct WorkerLocal {
    // --device cuda with several nodes: this worker's group across the nodes, which
    // checked the join before NCCL's id went through the store.
    std::unique_ptr<Communicator> across;
    // --telemetry: this worker's staleness probe.
    std::optional<StalenessProbe> probe;
    bool conflicts_started = false;  // --conflicts: this process's sample is set
    // --device cuda: this worker's rows on the device and its kernels.
    std::unique_ptr<DeviceSteps> device;
    // --device cuda: the mode's part of the device path (ddp: the ranks' gradient
    // sums), once made.
    std::unique_ptr<DevicePart> device_part;
    bool device_part_made = false;
    // What the mode does around the steps (ModeDef::make_parts: ddp's gradient sync,
    // dp's threads, ps's replica, striped's stripes; hogwild's replica, hot window and
    // node sync), once made, in the order they act.
    std::vector<std::unique_ptr<EpochPart>> parts;
    std::vector<EpochPart*> part_list;  // the same, as the step loop takes them
    bool parts_made = false;
  } local;

  // The parent's run: makes the arena and initialises it. With `attached` (a worker
  // started from a description, worker_start.hpp): the arena the parent made, and
  // `device_fd`, the device arena's descriptor where it has one.
  // `other_rows`: the bytes of rows the caller holds beside `tr` and `te` (their
  // sources, when these are copies), for the memory estimate.
  Run(const TrainConfig& c, Model& m, const Dataset& tr, const Dataset* te,
      std::optional<Arena> attached = std::nullopt, int device_fd = -1,
      std::uint64_t other_rows = 0);
  // The parent's estimate of the run's peak memory, checked before the arena was
  // made (trainer/memory_plan.hpp).
  MemoryEstimate memory;
  static constexpr std::size_t kPage = 4096;
  void map_hot_window(std::size_t bytes, bool asked);

  // Positions [begin, end) of each epoch's order owned by worker `rank` (in a
  // synchronous mode every worker gets rows / workers: the last rows / workers of
  // the epoch's order are left out, as DistributedSampler's drop_last does).
  std::pair<std::size_t, std::size_t> partition(unsigned rank) const;
  // The body of a worker (forked, or the parent itself in serial mode): the epochs
  // from its progress record on.
  int work(unsigned rank);
  // What worker (or service process) `rank`'s mode part is made from.
  ModeWorker mode_worker(unsigned rank);
  // --device cuda: worker `rank`'s group of every rank of the run (ModeWorker's
  // device_communicator): NCCL's, its id from rank 0 through the arena or, across
  // nodes, the rendezvous store; else the run's own.
  std::unique_ptr<Communicator> device_communicator(unsigned rank);
  // One epoch of worker `rank`, from the position its record holds for epoch e.
  void run_epoch(unsigned rank, unsigned e);
  // What worker `rank` trains `rows` of epoch e with: the data, the step sizes, its
  // record, the mode's parts and instruments (made on the first call).
  EpochTask task_for(unsigned rank, unsigned e, std::span<const std::uint32_t> rows);
  // --balance steal, once worker `rank` has finished every epoch: takes the second
  // half of the unclaimed grains of the share with the most left, trains them, and
  // again, until every other worker has finished every epoch; a respawned thief
  // first ends the steal its predecessor held (trainer/work_share.hpp).
  void steal_rows(unsigned rank);
  // Trains the range worker `rank` holds of worker `owner`'s share, from its
  // record's place where `resume`; false when cut short (a stop, SIGTERM).
  bool train_stolen(unsigned rank, unsigned owner, bool resume);
  // The rows worker `rank` visits in epoch e, in order.
  void rows_of(unsigned rank, unsigned e, std::vector<std::uint32_t>& rows) const;
  bool stopping() const { return control->stop.load(std::memory_order_relaxed) != 0; }
  // In a worker: the run stops, this worker got SIGTERM, or its parent is gone.
  bool cut_short() const;

  Evaluation evaluate(const ParamSet& p) const;
  // The snapshot slot holding epoch e (1-based), or null, and what it holds.
  SnapshotSlot* slot_for(unsigned e) const;
  CaptureCounts counts_of(const SnapshotSlot& slot) const;
  // Epoch e's (1-based) counts at its end (epoch_ends), if its entry still holds them.
  std::optional<CaptureCounts> epoch_end(unsigned e) const;
  // Runs copy() (a copy of the shared weights, or nothing) between reading every
  // worker's `samples` and every worker's `begun`: what the copy holds.
  template <class Copy>
  CaptureCounts capture(Copy&& copy) const {
    CaptureCounts c;
    c.low.reserve(workers);
    c.high.reserve(workers);
    for (auto& p : progress) c.low.push_back(p.samples.load(std::memory_order_acquire));
    const std::int64_t t0 = now_ns();
    copy();
    const std::int64_t t1 = now_ns();
    fence(std::memory_order_acquire);  // the copy's loads come first
    for (auto& p : progress) c.high.push_back(p.begun.load(std::memory_order_relaxed));
    // A respawned worker's counters restart at its published position: never below.
    for (unsigned w = 0; w < workers; ++w) c.high[w] = std::max(c.high[w], c.low[w]);
    c.time = static_cast<double>((t0 + t1) / 2 - control->start_ns) * 1e-9;
    return c;
  }
  // Mean progressive loss of epoch e (0-based) over all workers.
  double train_loss(unsigned e) const;
  std::uint64_t samples() const;
  unsigned min_epochs() const;

  // Writes the checkpoint at `path`: every worker's record, then the arena's
  // tensors (parameters and any optimiser state) read from the arena as the file
  // is written, a chunk at a time (no copy of the weights), while workers may run:
  // a Hogwild-consistent picture (see docs/RELIABILITY.md). Throws the divergence
  // error at a non-finite weight, leaving the previous file, so a good checkpoint
  // is never replaced by a bad one. `restarts`: the parent's count of respawned
  // workers so far.
  void write_checkpoint(const std::string& path, double train_seconds, unsigned restarts) const;
  // Before any worker starts: puts a checkpoint's tensors and records in place;
  // returns the checkpoint's count of restarts.
  unsigned restore(const Checkpoint& c, const std::string& path);
  // --save-model: the weights as a model file (model_file.hpp), read from the arena
  // as it is written; `epochs`, those every worker completed.
  void write_model(const std::string& path, unsigned epochs) const;
  // --init-from, before any worker starts: a model file's weights in place of the
  // initialisation; ConfigError when its model or a tensor's shape is not this run's.
  void init_from_model(const std::string& path);

  // A synchronous mode, every worker gone: puts every worker's record at the
  // earliest place any of them reached (what they all did), and readies the
  // mode's blocks for a new group (ModeDef::init_blocks). Returns that place
  // (epoch, row).
  std::pair<unsigned, std::uint64_t> align_workers();

  // Worker `rank` finished epoch e: adds it to the epoch's count once, however
  // often a respawned worker gets here; true when it was the last to finish.
  bool count_finish(unsigned rank, unsigned e);

 private:
  void snapshot_if_last(unsigned rank, unsigned e);
  // What a checkpoint holds: every tensor and state tensor, by block name.
  struct SavedTensor {
    std::string name;
    float* data;
    std::size_t size;
    MemorySpace space;
    Dtype dtype;  // a checkpoint holds floats whatever the tensor's dtype
  };
  std::vector<SavedTensor> saved_tensors() const;
};

}  // namespace hogwild::detail
