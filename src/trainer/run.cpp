#include "trainer/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <sys/mman.h>
#include <fmt/format.h>
#include <new>
#include <numeric>
#include <thread>
#include <zlib.h>

#include "comm/gloo.hpp"
#include "trainer/memory_plan.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/model_registry.hpp"
#include "memory/param_snapshot.hpp"
#include "device/device_backend.hpp"
#include "modes/ps/ps.hpp"
#include "science/conflicts.hpp"
#include "process.hpp"
#include "trainer/epoch_order.hpp"
#include "trainer/step_loop.hpp"
#include "trainer/work_share.hpp"

namespace hogwild::detail {

// WorkerProgress lives in the shared arena: every field must be lock-free (no
// hidden lock private to one process).
static_assert(std::atomic<double>::is_always_lock_free &&
              std::atomic<std::uint64_t>::is_always_lock_free &&
              std::atomic<std::uint32_t>::is_always_lock_free);

Problem make_problem(const Dataset& train, const Dataset* test, const LabelMap& labels) {
  Problem p;
  p.layout = train.layout();
  p.features = train.cols();
  p.classes = labels.classes();
  if (test) {
    // Dense rows of floats and of bytes hold the same kind of values: they mix.
    if (test->layout() != train.layout() && !(test->dense() && train.dense()))
      throw ConfigError(fmt::format("{} has {} rows but {} has {} rows", train.source(),
                                    to_string(train.layout()), test->source(),
                                    to_string(test->layout())));
    if (train.dense() && test->cols() != train.cols())
      throw ConfigError(fmt::format("{} has {} columns but {} has {}", train.source(),
                                    train.cols(), test->source(), test->cols()));
    // Sparse test features the training set never saw get (zero) weights too.
    p.features = std::max(p.features, test->cols());
  }
  if (p.layout == Layout::ratings) {
    p.users = std::max(train.users(), test ? test->users() : 0);
    p.items = p.features;
    // A model that reads a rating row as two sparse feature ids stays in bounds.
    p.features = std::max(p.users, p.items);
  }
  if (labels.kind() == LabelKind::real && !train.empty()) {
    double sum = 0;
    for (float y : train.labels()) sum += y;
    p.target_mean = sum / static_cast<double>(train.rows());
  }
  if (p.features == 0) throw ConfigError(train.source() + " has no features");
  return p;
}

namespace {

std::size_t padded(std::size_t floats) { return (floats + 15) / 16 * 16; }

// The trainer's shared objects in the arena: constructed by the process that made
// it, found by a worker that attached it.
template <class T>
T* in_arena(std::byte* at, std::size_t n, bool attached) {
  return attached ? std::launder(reinterpret_cast<T*>(at)) : new (at) T[n];
}

}  // namespace

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Index of the first non-finite float of p[0, n), or n: blocks OR-reduced with an
// integer test of the exponent bits (the compiler vectorises it; 1M floats take
// well under a millisecond), then the one block that has it searched again.
std::size_t first_non_finite(const float* p, std::size_t n) noexcept {
  constexpr std::size_t kBlock = 1024;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    std::uint32_t any = 0;
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, p + i, sizeof u);
      any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (any)
      for (std::size_t i = b; i < e; ++i)
        if (!std::isfinite(p[i])) return i;
  }
  return n;
}

std::optional<std::string> find_non_finite(const ParamSet& p) {
  if (!p.on_host()) return find_non_finite(ParamSnapshot(p).params());
  for (const auto& t : p.tensors())
    if (const std::size_t i = first_non_finite(t.data, t.size); i < t.size)
      return fmt::format("{}[{}] = {}", t.name, i, t.data[i]);
  return std::nullopt;
}

Error divergence(const TrainConfig& c, const std::string& what, double epoch,
                 std::uint64_t samples) {
  const std::string when = epoch == std::floor(epoch)
                               ? fmt::format("after epoch {}", epoch)
                               : fmt::format("during epoch {}", static_cast<unsigned>(epoch) + 1);
  // One process's steps; several workers' steps are their own (a global step count of
  // 800 in an epoch of 400 rows read as a contradiction).
  const std::string count =
      is_parallel(c.mode) && c.workers > 1
          ? fmt::format("{} examples by {} workers", samples, c.workers)
          : fmt::format("step {} ({} examples)", samples / std::max<std::size_t>(c.batch, 1), samples);
  return Error(fmt::format("training diverged {}, {}: {}; try a smaller --lr (now {}); the last "
                           "checkpoint written, if any, is kept",
                           when, count, what, c.step_size.lr0),
               kExitFailure);
}

// The window of hot coordinates: the first page boundary past w's end, mapped
// private and anonymous over the arena's pages there, before any fork: each worker
// inherits its own copy-on-write copy, so `w + index` for a renumbered hot feature
// reads and writes the worker's copy. The training rows are renumbered to match.
// `asked`: an option asked for it (--hot-k, --layout hot), and what fails is an
// error; else (the mode's own: --layout auto's third choice) the run goes on
// without it.
void Run::map_hot_window(std::size_t bytes, bool asked) {
  float* w = params.data(0);
  const auto end = reinterpret_cast<std::uintptr_t>(w + specs[0].size);
  auto* window = reinterpret_cast<float*>((end + kPage - 1) / kPage * kPage);
  const auto first = static_cast<std::size_t>(window - w);
  const auto drop = [&](auto error) {
    if (asked) throw error;
    hot.clear();
  };
  if (first + hot.size() > std::numeric_limits<std::uint32_t>::max())
    return drop(ConfigError("--hot-k: too many features for 32-bit indices past the weights"));
  if (!arena.map_private(reinterpret_cast<std::byte*>(window), bytes))
    return drop(ResourceError(fmt::format("cannot map the {} bytes of --hot-k's window past the "
                                          "weights (a hugetlbfs --shm-dir?): {}",
                                          bytes, std::strerror(errno))));
  hot_window = window;
  window_shared_again.arena = &arena;
  window_shared_again.bytes = bytes;
  window_shared_again.at = window;
  std::vector<std::uint32_t> map(train.cols());
  std::iota(map.begin(), map.end(), 0u);
  for (std::size_t r = 0; r < hot.size(); ++r) map[hot[r]] = static_cast<std::uint32_t>(first + r);
  hot_train = train.renumbered(map);
}

Run::Run(const TrainConfig& c, Model& m, const Dataset& tr, const Dataset* te,
         std::optional<Arena> attached, int device_fd, std::uint64_t other_rows)
    : cfg(c), mode(mode_def(c.mode)), model(m), train(tr), test(te) {
  labels = LabelMap::fit(model.label_kind(), train, model.name());
  train_targets = labels.targets(train);
  if (test) test_targets = labels.targets(*test);
  classes = labels.classes();
  problem = make_problem(train, test, labels);
  model.configure(problem);
  specs = model.parameters();
  workers = mode.parallel() ? cfg.workers : 1;

  std::vector<BlockSpec> blocks{
      {"control", sizeof(Control)},
      {"progress", sizeof(WorkerProgress) * workers},
      {"epoch_loss", sizeof(double) * workers * cfg.epochs},
  };
  std::size_t floats = 0;
  const bool stateful = has_state(cfg.optimizer);
  // Hot coordinates: w's block gets room for a page-aligned window past its end
  // (--hot-k, or --layout auto's third choice where it has one).
  std::size_t window_bytes = 0;
  if (cfg.hot_k > 0 && mode.parallel()) {
    check_hot_coordinates(model, train, cfg.layout == WeightLayout::hot ? "--layout hot" : "--hot-k");
    hot = most_frequent_features(train, specs[0].size, cfg.hot_k);
  } else if (cfg.hot_k == 0) {
    hot = mode.own_hot_features(cfg, workers, train, specs[0].size);
  }
  if (!hot.empty()) {
    window_bytes =
        (HotWindow::window_floats(specs, hot.size()) * sizeof(float) + kPage - 1) / kPage * kPage;
  }
  store = cfg.device == Device::cuda
              ? make_tensor_store(MemorySpace::device,
                                  [&] { return device_backend().memory(cfg.cuda_ipc); }, &train,
                                  train_targets.data())
              : make_tensor_store(mode.space());
  for (auto& b : store->arena_blocks(specs, stateful, window_bytes ? kPage + window_bytes : 0))
    blocks.push_back(std::move(b));
  for (auto& s : specs) floats += padded(s.size);
  if (cfg.nodes > 1 && !mode.joins_nodes()) {
    std::size_t all = 0;
    for (auto& s : specs) all += padded(s.size);
    blocks.push_back({"node_base", all * sizeof(float)});
  }
  // --telemetry where the steps write the shared weights themselves (not ddp's, dp's
  // or ps's gradients, not replicas or the hot window).
  if (cfg.telemetry && mode.steps_write_weights() && cfg.merge_every == 0 && cfg.hot_k == 0)
    blocks.push_back({"staleness", sizeof(StalenessRecord) * workers});
  if (cfg.conflicts) blocks.push_back({"conflicts", conflict_block_bytes(workers)});
  servers = mode.services(cfg);
  const ModeArena mode_arena{cfg, specs, workers};
  mode.arena_blocks(mode_arena, blocks);
  // Each epoch's evaluation reads a snapshot the last worker to finish it took: only
  // with a test set to evaluate on (without one, 8 MB of a 4 MB model's 12.6 MB arena
  // were set up and never read).
  if (mode.parallel() && test) {
    blocks.push_back({"finishers", sizeof(std::uint32_t) * cfg.epochs});
    const unsigned n = slot_count = snapshot_slots(floats);
    blocks.push_back({"snapshot_counts", n * 2 * workers * sizeof(std::uint64_t)});
    for (unsigned i = 0; i < n; ++i)
      blocks.push_back({fmt::format("snapshot{}", i), sizeof(SnapshotSlot) + floats * sizeof(float)});
  } else if (mode.parallel()) {  // the epochs' ends only
    blocks.push_back({"finishers", sizeof(std::uint32_t) * cfg.epochs});
    blocks.push_back({"epoch_ends", kEpochEnds * epoch_stride() * sizeof(std::uint64_t)});
  }
  // A worker started from a description attaches the arena its parent made and
  // initialised, and finds every block by name; everything else above (labels, the
  // model's shapes, the hot features) it computed as the parent did.
  const bool attach = attached.has_value();
  if (attach) {
    arena = std::move(*attached);
    for (const auto& b : blocks)
      if (!arena.has(b.name) || arena.block(b.name).size() < b.bytes)
        throw Error(fmt::format("the arena handed to this worker has no block '{}' of {} bytes: it "
                                "was made for another configuration", b.name, b.bytes));
  } else {
    // Everything the run will hold at its peak, in every process, before any of it.
    // A kept arena this run will not take is freed before its memory is planned.
    const std::size_t arena_bytes = Arena::required_bytes(blocks);
    release_spare_arena(arena_bytes);
    const MemoryPlan plan = plan_memory(*this, arena_bytes, window_bytes, other_rows);
    check_memory(plan);
    memory = plan.estimate;
    // A parallel run's parent maps the arena's pages once its workers have started
    // (Supervisor), not before: off the critical path of a short run (a hot window's
    // few private pages are then mapped in the parent alone: its workers forked
    // first, and a respawned one reloads its window from the weights). The segment is kept for the next run of its size in
    // this process (every worker has ended when the Run is gone; the window's pages
    // are the segment's again by then: window_shared_again).
    ArenaOptions options{cfg.shm_dir, cfg.huge_pages};
    options.map_now = !mode.parallel();
    options.reuse = true;
    arena = Arena::create(blocks, options);
  }
  control = in_arena<Control>(arena.block("control").data(), 1, attach);
  if (!attach) {
    control->parent = getpid();
    mode.init_blocks(mode_arena, arena);
  }
  progress = {in_arena<WorkerProgress>(arena.block("progress").data(), workers, attach), workers};
  epoch_loss = arena.array<double>("epoch_loss");
  if (arena.has("staleness"))
    staleness = {in_arena<StalenessRecord>(arena.block("staleness").data(), workers, attach), workers};
  if (arena.has("comm") && !attach) {  // the mode's groups (ModeWorker::communicator)
    if (cfg.comm == "gloo") {  // a FileStore in a directory of our own
      const auto [dir, lock] = make_rendezvous_dir();
      rendezvous_dir.path = dir;
      rendezvous_dir.lock = lock;
      HOGWILD_ENFORCE_LT(dir.size(), sizeof(control->rendezvous));
      std::memcpy(control->rendezvous, dir.c_str(), dir.size() + 1);
    }
  }
  if (arena.has("nccl_id")) in_arena<NcclIdSlot>(arena.block("nccl_id").data(), 1, attach);
  params = store->open(arena, specs, stateful, attach, device_fd);
  if (!attach) initialise(params, specs, cfg.seed);
  if (!attach && !cfg.init_from.empty()) init_from_model(cfg.init_from);
  if (!attach && cfg.conflicts)
    choose_conflict_sample(arena.block("conflicts").data(), specs, train, model.feature_indexed(),
                           cfg.conflict_k, cfg.seed);
  if (window_bytes) map_hot_window(window_bytes, cfg.hot_k > 0);
  // Several nodes, no --run-id: the run's id is the first "hogwild-<k>" that not
  // every node joined before (earlier runs through the same store used the ones
  // before, and every node skips the same ones; nodes started with other options
  // then meet, and the fingerprint check stops them; a second node with the same
  // --node-rank finds its key taken: exit 2). The store is opened and
  // closed here, before any fork.
  // (The first group: worker 0's, or with a parameter server server 0's.)
  if (!attach && cfg.nodes > 1)
    control->generation = first_free_generation(cfg, servers ? workers : 0);
  if (!attach && cfg.nodes > 1) {
    across_keys.run = this;
    across_keys.first_generation = control->generation;
  }
  if (arena.has("node_base")) {
    auto* data = reinterpret_cast<float*>(arena.block("node_base").data());
    std::vector<ParamSet::Tensor> t;
    for (auto& s : specs) {
      t.push_back({s.name, data, s.size});
      data += padded(s.size);
    }
    node_base = ParamSet(std::move(t));
  }
  if (arena.has("finishers"))
    finishers = {in_arena<std::atomic<std::uint32_t>>(arena.block("finishers").data(), cfg.epochs,
                                                     attach),
                 cfg.epochs};
  if (arena.has("epoch_ends")) epoch_ends = arena.array<std::uint64_t>("epoch_ends");
  for (unsigned i = 0; arena.has(fmt::format("snapshot{}", i)); ++i) {
    {
      auto b = arena.block(fmt::format("snapshot{}", i));
      slots.push_back(in_arena<SnapshotSlot>(b.data(), 1, attach));
      auto* data = reinterpret_cast<float*>(b.data() + sizeof(SnapshotSlot));
      std::vector<ParamSet::Tensor> st;
      for (auto& s : specs) {
        st.push_back({s.name, data, s.size});
        data += padded(s.size);
      }
      slot_params.emplace_back(std::move(st));
      slot_counts.push_back(arena.array<std::uint64_t>("snapshot_counts").subspan(2 * workers * i,
                                                                                  2 * workers));
    }
  }
  // Both from one pass over the rows per tensor.
  const bool snapshot_ranges = !slots.empty();
  const bool replica_ranges = mode.parallel() && cfg.partition == Partition::shuffled &&
                              mode.may_merge(cfg, workers);
  for (std::size_t t = 0; t < specs.size() && (snapshot_ranges || replica_ranges); ++t) {
    Ranges all = model.trained_ranges(t, train, 0, train.rows());
    // The evaluation reads the coordinates a step on the test rows would (a sparse
    // model: the test rows' features); of those, a snapshot refreshes the ones
    // training changes. Copying a few untouched floats beats another loop: whole lines.
    if (snapshot_ranges)
      evaluated_ranges.push_back(coalesce_ranges(
          intersect_ranges(all, model.trained_ranges(t, *test, 0, test->rows())), 16));
    if (replica_ranges) row_ranges.push_back(std::move(all));
  }
}

bool Run::count_finish(unsigned rank, unsigned e) {
  // Once per worker and epoch: a worker respawned after counting (killed while it
  // copied the snapshot, say) counted again, and the next epoch's snapshot was then
  // taken before every worker had finished it. The mark comes first: a death
  // between mark and count leaves the epoch one short, so it is evaluated on the
  // live weights instead, never early.
  WorkerProgress& p = progress[rank];
  if (p.counted.load(std::memory_order_acquire) > e) return false;
  p.counted.store(e + 1, std::memory_order_release);
  return finishers[e].fetch_add(1, std::memory_order_acq_rel) + 1 == workers;
}

Run::OwnedDir::~OwnedDir() {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
  if (lock >= 0) ::close(lock);
}

void Run::capture_start() {
  if (arena.has("conflicts")) record_conflict_start(arena.block("conflicts").data(), params);
  if (node_base.count() == 0) return;
  static const std::vector<Ranges> all;
  copy_ranges(params, node_base, all);
}

std::pair<unsigned, std::uint64_t> Run::align_workers() {
  auto place = [](const WorkerProgress& p) {
    const unsigned e = p.epoch.load(std::memory_order_relaxed);
    const unsigned done = p.epochs_done.load(std::memory_order_relaxed);
    return done > e ? std::pair<unsigned, std::uint64_t>{done, 0}
                    : std::pair<unsigned, std::uint64_t>{e, p.position.load(std::memory_order_relaxed)};
  };
  std::pair<unsigned, std::uint64_t> first{cfg.epochs, 0};
  for (const auto& p : progress) first = std::min(first, place(p));
  const auto [epoch, position] = first;
  const auto [begin, end] = partition(0);
  for (unsigned w = 0; w < workers; ++w) {
    WorkerProgress& p = progress[w];
    // A worker put back into an epoch it had finished resumes with that epoch's
    // whole loss: the rows it trains again are counted twice (as they are trained
    // twice), as with a respawned Hogwild! worker.
    const double loss = place(p).first > epoch ? epoch_loss[w * cfg.epochs + epoch]
                                               : p.loss.load(std::memory_order_relaxed);
    record_write_begin(p);
    p.epoch.store(epoch, std::memory_order_relaxed);
    p.position.store(position, std::memory_order_relaxed);
    p.loss.store(loss, std::memory_order_relaxed);
    p.epochs_done.store(epoch, std::memory_order_relaxed);
    record_write_end(p);
    p.samples.store(std::uint64_t{epoch} * (end - begin) + position, std::memory_order_relaxed);
    p.begun.store(p.samples.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // The mode's blocks as a new group finds them (ddp: its communicator's region).
  mode.init_blocks(ModeArena{cfg, specs, workers}, arena);
  ++control->generation;  // the new group's Gloo keys are its own
  return first;
}

// Called by a worker after finishing epoch e: the last one to finish copies the
// weights into the slot of epoch e, if the parent is done with that slot.
void Run::snapshot_if_last(unsigned rank, unsigned e) {
  if (finishers.empty()) return;
  if (!count_finish(rank, e)) return;
  if (!epoch_ends.empty()) {  // no test set: the counts alone
    const CaptureCounts c = capture([] {});
    const std::span<std::uint64_t> entry = epoch_ends.subspan((e % kEpochEnds) * epoch_stride(),
                                                              epoch_stride());
    // (The entry's last writer, epoch e - kEpochEnds's, is done: it finished that
    // epoch's snapshot before training the epochs up to this one.)
    std::atomic_ref<std::uint64_t>(entry[0]).store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<std::uint64_t>(entry[1]).store(std::bit_cast<std::uint64_t>(c.time),
                                                   std::memory_order_relaxed);
    for (unsigned w = 0; w < workers; ++w) {
      std::atomic_ref<std::uint64_t>(entry[2 + w]).store(c.low[w], std::memory_order_relaxed);
      std::atomic_ref<std::uint64_t>(entry[2 + workers + w]).store(c.high[w], std::memory_order_relaxed);
    }
    std::atomic_ref<std::uint64_t>(entry[0]).store(e + 1, std::memory_order_release);
    return;
  }
  // A parameter server's last epoch is evaluated once the servers have applied every
  // push (on every node) and ended: on the weights as they finally are.
  if (servers && e + 1 == cfg.epochs) return;
  const std::size_t at = e % slots.size();
  SnapshotSlot& slot = *slots[at];
  if (slot.epoch.load(std::memory_order_acquire) != 0 &&
      !slot.consumed.load(std::memory_order_acquire))
    return;  // the parent still reads it: that epoch falls back to the live weights
  slot.epoch.store(0, std::memory_order_relaxed);
  // A slot's first snapshot copies everything (the untrained coordinates never
  // change after it).
  static const std::vector<Ranges> all;
  const CaptureCounts c = capture(
      [&] { copy_ranges(params, slot_params[at], slot.filled ? evaluated_ranges : all); });
  slot.filled = true;
  slot.time = c.time;
  std::copy(c.low.begin(), c.low.end(), slot_counts[at].begin());
  std::copy(c.high.begin(), c.high.end(), slot_counts[at].begin() + workers);
  slot.consumed.store(0, std::memory_order_relaxed);
  slot.epoch.store(e + 1, std::memory_order_release);
}

std::pair<std::size_t, std::size_t> Run::partition(unsigned rank) const {
  if (mode.deals_rows()) {
    const std::size_t per = train.rows() / world();
    return {rank * per, (rank + 1) * per};
  }
  return share(train.rows(), world(), global_rank(rank));
}

// A mode that deals rows (ddp) deals the epoch's order (the one serial mode would visit) out
// in turn, as DistributedSampler does: worker k's j-th row is the order's
// (j W + k)-th, so the workers' b-th mini-batches of B rows together are serial
// mode's b-th mini-batch of W B rows.
void Run::rows_of(unsigned rank, unsigned e, std::vector<std::uint32_t>& rows) const {
  if (!mode.deals_rows()) {
    epoch_rows(cfg.partition, train.rows(), world(), global_rank(rank), cfg.seed, e, rows);
    return;
  }
  std::vector<std::uint32_t> all;
  epoch_rows(cfg.partition, train.rows(), 1, 0, cfg.seed, e, all);
  const auto [begin, end] = partition(rank);
  rows.resize(end - begin);
  const unsigned w = world(), k = global_rank(rank);
  for (std::size_t j = 0; j < rows.size(); ++j) rows[j] = all[j * w + k];
}

// Epoch e's order is recomputed from the seed, e and the rank, so a respawned worker
// finds the same rows and skips the `position` rows its predecessor published; at
// most the 64 mini-batches since the last publication (with a replica or hot
// coordinates: since the last merge or flush) are trained twice.
EpochTask Run::task_for(unsigned rank, unsigned e, std::span<const std::uint32_t> rows) {
  EpochTask task;
  task.data = &train;  // (a hot window's part gives its renumbered copy: EpochPart::rows)
  task.targets = train_targets.data();
  task.rows = rows;
  task.batch = cfg.batch;
  task.step_size = cfg.step_size;
  task.epoch = e;
  task.workers = world();
  task.kind = StepKind{mode.access(), static_cast<std::uint8_t>(cfg.optimizer)};
  task.params = params;
  task.progress = &progress[rank];
  task.stop = &control->stop;
  task.terminated = &worker_terminated();
  task.parent = launcher();  // 0 in serial mode: the parent is the worker
  if (!local.parts_made) {  // what the mode does around the steps, made once
    mode.make_parts(mode_worker(rank), local.parts);
    for (const auto& part : local.parts) local.part_list.push_back(part.get());
    local.parts_made = true;
  }
  if (cfg.device == Device::cuda) {
    if (!local.device)
      local.device = device_backend().steps(cfg, *mode.device_access(), model, train,
                                            train_targets.data(), params, store->device_lock(),
                                            store->rows(), rank);
    task.device = local.device.get();
    if (!local.device_part_made) {  // the mode's part of the device path, made once
      local.device_part = mode.make_device_part(mode_worker(rank), *local.device);
      local.device_part_made = true;
    }
    task.device_part = local.device_part.get();
  }
  if (cfg.conflicts) {  // every write one at a time, the sampled ones watched
    if (!local.conflicts_started) {
      start_conflict_sampling(arena.block("conflicts").data(), rank, params,
                              mode.access() == access_index<AtomicUpdate>());
      local.conflicts_started = true;
    }
    task.kind.access = access_index<MeasuredUpdate>();
  }
  task.delay_ns = cfg.grad_delay_ns;
  if (cfg.straggler_worker >= 0 && global_rank(rank) == static_cast<unsigned>(cfg.straggler_worker))
    task.slowdown = cfg.straggler_factor;
  // --telemetry (the arena has the block only where the steps write the shared
  // weights themselves).
  if (!staleness.empty()) {
    if (!local.probe)
      local.probe.emplace(progress, rank, staleness[rank], cfg.telemetry_every, cfg.seed);
    task.probe = &*local.probe;
  }
  // The parts, in the order they act after each batch.
  task.parts = local.part_list;
  return task;
}

void Run::run_epoch(unsigned rank, unsigned e) {
  WorkerProgress& p = progress[rank];
  std::vector<std::uint32_t> rows;
  rows_of(rank, e, rows);

  EpochTask task = task_for(rank, e, rows);
  if (p.epoch.load(std::memory_order_acquire) == e) {
    task.start = std::min<std::size_t>(p.position.load(std::memory_order_relaxed), rows.size());
    task.start_loss = p.loss.load(std::memory_order_relaxed);
  } else {
    record_write_begin(p);
    p.position.store(0, std::memory_order_relaxed);
    p.loss.store(0, std::memory_order_relaxed);
    p.epoch.store(e, std::memory_order_relaxed);
    record_write_end(p);
  }
  // --balance steal: the share's word for this epoch (a respawn keeps it, and the
  // grains a thief took), claimed from the worker's place.
  const std::size_t grain = grain_rows(cfg.batch);
  const bool steals = !no_steal(cfg, workers) && grains_of(rows.size(), grain) <= ShareWord::kMaxGrains;
  if (steals) {
    if (ShareWord::unpack(p.share.load(std::memory_order_acquire)).tag != epoch_tag(e)) {
      p.stolen_loss.store(0, std::memory_order_relaxed);
      const ShareWord w{epoch_tag(e), 0, static_cast<std::uint32_t>(grains_of(task.start, grain)),
                        static_cast<std::uint32_t>(grains_of(rows.size(), grain))};
      p.share.store(w.pack(), std::memory_order_release);
    }
    task.share = &p.share;
    task.grain = grain;
  }
  // Consistent with the position whatever was published last (less the rows of
  // earlier epochs that thieves trained: they count in the thieves' samples).
  const std::uint64_t given =
      steals ? given_before(p.given.load(std::memory_order_relaxed), p.share.load(std::memory_order_acquire),
                            e, rows.size(), grain)
             : 0;
  const std::uint64_t before = std::uint64_t{e} * rows.size() - given;
  p.begun.store(before + task.start, std::memory_order_relaxed);
  p.samples.store(before + task.start, std::memory_order_relaxed);
  // Its step sizes where static shares would have them (an inverse-time schedule
  // counts the rows others trained for it).
  task.lr_shift = static_cast<std::int64_t>(given);
  const auto own = mode.train_epoch(model, task, mode_worker(rank));  // simulated's
  double loss = own ? *own : train_epoch(model, task);
  epoch_loss[rank * cfg.epochs + e] = loss;
  // Its rows end at its share's limit, where a thief took the rest.
  const std::size_t limit = ShareWord::unpack(p.share.load(std::memory_order_acquire)).limit;
  const std::size_t own_end = steals ? std::min(rows.size(), limit * grain) : rows.size();
  if (cut_short() || p.position.load(std::memory_order_relaxed) < own_end) return;  // epoch cut short
  if (steals) {
    // The epoch is done when the thieves' rows are too: wait for the one that holds
    // a range (it took about as many rows as were left here), then count its loss.
    while (ShareWord::unpack(p.share.load(std::memory_order_acquire)).thief != 0) {
      if (cut_short()) return;
      ::usleep(200);
    }
    epoch_loss[rank * cfg.epochs + e] = loss + p.stolen_loss.load(std::memory_order_relaxed);
    const std::uint64_t counted = p.given.load(std::memory_order_relaxed);
    if ((counted & 0xffff) != ((e + 1) & 0xffff))  // (a respawn may get here twice)
      p.given.store(((counted >> 16) + rows.size() - own_end) << 16 | ((e + 1) & 0xffff),
                    std::memory_order_relaxed);
  }
  snapshot_if_last(rank, e);  // before epochs_done: the parent then finds the slot ready
  record_write_begin(p);
  p.epochs_done.store(e + 1, std::memory_order_release);
  record_write_end(p);
}

bool Run::cut_short() const {
  return stopping() || worker_terminated().load(std::memory_order_relaxed) || orphaned(launcher());
}

void Run::steal_rows(unsigned rank) {
  if (no_steal(cfg, workers)) return;
  WorkerProgress& me = progress[rank];
  for (unsigned v = 0; v < workers; ++v)
    if (v != rank && ShareWord::unpack(progress[v].share.load(std::memory_order_acquire)).thief == rank + 1 &&
        !train_stolen(rank, v, true))
      return;
  while (!cut_short()) {
    unsigned owner = workers;
    std::uint64_t seen = 0;
    ShareWord best;
    for (unsigned v = 0; v < workers; ++v) {
      const std::uint64_t word = progress[v].share.load(std::memory_order_acquire);
      const ShareWord w = ShareWord::unpack(word);
      if (v == rank || w.tag == 0 || w.thief != 0 || w.limit < w.claimed + 2) continue;
      if (owner == workers || w.limit - w.claimed > best.limit - best.claimed) {
        owner = v;
        seen = word;
        best = w;
      }
    }
    if (owner == workers) {
      // Nothing worth taking now. While another worker has epochs to go it will
      // have a share to take from once its next epoch begins (a straggler's tail).
      bool others = false;
      for (unsigned v = 0; v < workers; ++v)
        others = others || (v != rank && progress[v].epochs_done.load(std::memory_order_acquire) < cfg.epochs);
      if (!others) return;
      ::usleep(100);
      continue;
    }
    // Written before the steal, so that a respawn finds them with it. (The owner's
    // stolen_loss cannot change before the compare-and-swap unless the word does:
    // only a thief holding a range writes it.)
    me.steal_end.store(best.limit, std::memory_order_relaxed);
    me.steal_base.store(me.samples.load(std::memory_order_relaxed), std::memory_order_relaxed);
    me.stole_base.store(me.stole.load(std::memory_order_relaxed), std::memory_order_relaxed);
    me.steal_loss_base.store(progress[owner].stolen_loss.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
    record_write_begin(me);
    me.position.store(0, std::memory_order_relaxed);
    me.loss.store(0, std::memory_order_relaxed);
    record_write_end(me);
    ShareWord taken = best;
    taken.thief = rank + 1;
    taken.limit = best.limit - (best.limit - best.claimed) / 2;
    if (!progress[owner].share.compare_exchange_strong(seen, taken.pack(), std::memory_order_acq_rel,
                                                       std::memory_order_acquire))
      continue;  // the owner claimed a grain meanwhile, or another thief came first
    if (!train_stolen(rank, owner, false)) return;
  }
}

bool Run::train_stolen(unsigned rank, unsigned owner, bool resume) {
  WorkerProgress& me = progress[rank];
  WorkerProgress& of = progress[owner];
  // The owner stays in this epoch until the range is handed back.
  const unsigned e = of.epoch.load(std::memory_order_acquire);
  const ShareWord w = ShareWord::unpack(of.share.load(std::memory_order_acquire));
  std::vector<std::uint32_t> rows;
  rows_of(owner, e, rows);
  const std::size_t grain = grain_rows(cfg.batch);
  const std::size_t first = std::min(rows.size(), std::size_t{w.limit} * grain);
  const std::size_t last = std::min(
      rows.size(), static_cast<std::size_t>(me.steal_end.load(std::memory_order_relaxed)) * grain);
  const std::span<const std::uint32_t> range(rows.data() + first, last - first);
  EpochTask task = task_for(rank, e, range);
  if (resume) {
    task.start = std::min<std::size_t>(me.position.load(std::memory_order_relaxed), range.size());
    task.start_loss = me.loss.load(std::memory_order_relaxed);
  }
  const std::uint64_t base = me.steal_base.load(std::memory_order_relaxed);
  me.begun.store(base + task.start, std::memory_order_relaxed);
  me.samples.store(base + task.start, std::memory_order_relaxed);
  // Its rows' place in the step-size schedule: where the owner would have trained them.
  task.lr_shift = static_cast<std::int64_t>(std::uint64_t{e} * rows.size() + first) -
                  static_cast<std::int64_t>(base);
  const double loss = train_epoch(model, task);
  if (stopping() || worker_terminated().load(std::memory_order_relaxed) ||
      me.position.load(std::memory_order_relaxed) < range.size())
    return false;
  of.stolen_loss.store(me.steal_loss_base.load(std::memory_order_relaxed) + loss, std::memory_order_relaxed);
  me.stole.store(me.stole_base.load(std::memory_order_relaxed) + range.size(), std::memory_order_relaxed);
  // Handed back (release: the loss first): the owner may end its epoch.
  std::uint64_t word = of.share.load(std::memory_order_relaxed);
  for (;;) {
    ShareWord back = ShareWord::unpack(word);
    back.thief = 0;
    if (of.share.compare_exchange_weak(word, back.pack(), std::memory_order_acq_rel, std::memory_order_relaxed))
      return true;
  }
}

ModeWorker Run::mode_worker(unsigned rank) {
  ModeWorker w{cfg, rank, params, arena};
  w.model = &model;
  w.problem = &problem;
  w.train = &train;
  w.stop = &control->stop;
  w.communicator = [this, rank] { return make_communicator(rank); };
  w.across = [this, rank] {
    auto across = make_across(rank);
    if (across) check_join(*across);
    return across;
  };
  w.world = world();
  w.device_communicator = [this, rank] { return device_communicator(rank); };
  if (hot_window) {
    w.hot = &hot;
    w.hot_window = hot_window;
    w.hot_rows = &*hot_train;
  }
  w.own_rows = cfg.partition == Partition::contiguous
                   ? partition(rank) : std::pair<std::size_t, std::size_t>{0, train.rows()};
  if (!row_ranges.empty()) w.row_ranges = &row_ranges;
  w.node_base = &node_base;
  w.others_done = [this] {  // this node's workers 1.. past the leader's epoch
    const unsigned e = progress[0].epoch.load(std::memory_order_relaxed);
    for (unsigned k = 1; k < workers && !stopping(); ++k)
      while (progress[k].epochs_done.load(std::memory_order_acquire) <= e && !stopping())
        ::usleep(500);
    return !stopping();
  };
  return w;
}

int Run::work(unsigned rank) {
  if (rank >= workers) {  // a parameter server's process
    mode.serve(mode_worker(rank), rank - workers);
    return 0;
  }
  WorkerProgress& p = progress[rank];
  p.pid.store(getpid(), std::memory_order_relaxed);
  if (cfg.pin && mode.parallel()) pin_to_cpu(rank);
  const auto& terminated = worker_terminated();
  for (unsigned e = p.epochs_done.load(std::memory_order_acquire);
       e < cfg.epochs && !stopping() && !terminated.load(std::memory_order_relaxed); ++e) {
    if (orphaned(launcher())) return kExitWorkerFailed;
    try {
      run_epoch(rank, e);
    } catch (const Error& error) {
      auto record = [&](std::atomic<std::uint32_t>& state, char* text, std::size_t size) {
        std::uint32_t none = 0;
        if (state.compare_exchange_strong(none, 1, std::memory_order_relaxed)) {
          std::snprintf(text, size, "%s", error.what());
          state.store(2, std::memory_order_release);
        }
      };
      if (error.exit_code() == kExitBadInput)
        record(control->bad_input_state, control->bad_input, sizeof control->bad_input);
      if (dynamic_cast<const PeerUnreachable*>(&error))
        record(control->unreachable_state, control->unreachable, sizeof control->unreachable);
      const auto* comm = dynamic_cast<const CommError*>(&error);
      std::int32_t none = -1;
      if (comm && !comm->waited_for.empty() && comm->waited_for.front() < workers &&
          control->waited_for.compare_exchange_strong(
              none, static_cast<std::int32_t>(comm->waited_for.front()), std::memory_order_relaxed))
        control->waiter.store(static_cast<std::int32_t>(rank), std::memory_order_release);
      throw;
    }
  }
  // SIGTERM: the batch ended and the place is published (a respawn continues there).
  if (terminated.load(std::memory_order_relaxed)) return kExitTerminated;
  if (!stopping()) steal_rows(rank);
  if (terminated.load(std::memory_order_relaxed)) return kExitTerminated;
  for (const auto& part : local.parts)
    if (!stopping())
      part->finish(cfg.step_size.at_epoch_lr(cfg.step_size.epoch_start(cfg.epochs - 1),
                                                      p.samples.load() * world()));
  p.finish_ns.store(now_ns(), std::memory_order_relaxed);
  p.exit_memory.store(memory_share().anon, std::memory_order_relaxed);  // the parent's peak
  for (const auto& part : local.parts) part->report(p);
  return 0;
}

Evaluation Run::evaluate(const ParamSet& p) const {
  if (!test) return {};
  if (!p.on_host()) return evaluate(ParamSnapshot(p).params());  // a device store's
  return model.evaluate(p, *test, test_targets.data());
}

CaptureCounts Run::counts_of(const SnapshotSlot& slot) const {
  const auto at = static_cast<std::size_t>(std::find(slots.begin(), slots.end(), &slot) - slots.begin());
  const std::span<std::uint64_t> counts = slot_counts[at];
  CaptureCounts c;
  c.low.assign(counts.begin(), counts.begin() + workers);
  c.high.assign(counts.begin() + workers, counts.end());
  c.time = slot.time;
  return c;
}

std::optional<CaptureCounts> Run::epoch_end(unsigned e) const {
  if (epoch_ends.empty() || e == 0) return std::nullopt;
  const std::span<std::uint64_t> entry = epoch_ends.subspan(((e - 1) % kEpochEnds) * epoch_stride(),
                                                            epoch_stride());
  if (std::atomic_ref<std::uint64_t>(entry[0]).load(std::memory_order_acquire) != e) return std::nullopt;
  CaptureCounts c;
  c.time = std::bit_cast<double>(std::atomic_ref<std::uint64_t>(entry[1]).load(std::memory_order_relaxed));
  for (unsigned w = 0; w < workers; ++w) {
    c.low.push_back(std::atomic_ref<std::uint64_t>(entry[2 + w]).load(std::memory_order_relaxed));
    c.high.push_back(std::atomic_ref<std::uint64_t>(entry[2 + workers + w]).load(std::memory_order_relaxed));
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  // Overwritten meanwhile (the workers kEpochEnds epochs ahead): not epoch e's.
  if (std::atomic_ref<std::uint64_t>(entry[0]).load(std::memory_order_relaxed) != e) return std::nullopt;
  return c;
}

SnapshotSlot* Run::slot_for(unsigned e) const {
  if (slots.empty()) return nullptr;  // no test set: no slots
  SnapshotSlot* s = slots[(e - 1) % slots.size()];
  return s->epoch.load(std::memory_order_acquire) == e ? s : nullptr;
}

double Run::train_loss(unsigned e) const {
  double loss = 0;
  for (unsigned w = 0; w < workers; ++w) loss += epoch_loss[w * cfg.epochs + e];
  // The mean over the rows this node's workers trained: across nodes, its share of
  // the set (each node divided by the whole set's rows: two nodes printed 0.334 and
  // 0.345 where one printed 0.679).
  std::size_t rows = train.rows();
  if (cfg.nodes > 1) {
    rows = 0;
    for (unsigned w = 0; w < workers; ++w) {
      const auto [begin, end] = partition(w);
      rows += end - begin;
    }
  }
  return rows ? loss / static_cast<double>(rows) : 0;
}

std::uint64_t Run::samples() const {
  std::uint64_t s = 0;
  for (auto& p : progress) s += p.samples.load(std::memory_order_relaxed);
  return s;
}

unsigned Run::min_epochs() const {
  unsigned m = cfg.epochs;
  for (auto& p : progress) m = std::min(m, p.epochs_done.load(std::memory_order_acquire));
  return m;
}

}  // namespace hogwild::detail
