#include "hogwild/trainer.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "hogwild/arena.hpp"
#include "hogwild/error.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/rng.hpp"
#include "process.hpp"

namespace hogwild {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The trainer's control block in the arena.
struct Control {
  std::atomic<std::int32_t> stop{0};
  std::int64_t start_ns = 0;  // steady clock (CLOCK_MONOTONIC: the same in every process)
  RobustMutex mutex;
};

// The weights as they were when the last worker finished an epoch, copied by that
// worker so that each epoch's evaluation is exact however late the parent gets to
// it, and no worker waits. Two slots alternate; a slot is reused only after the
// parent has consumed it (otherwise that epoch is evaluated on the live weights).
struct alignas(64) SnapshotSlot {
  std::atomic<std::uint32_t> epoch{0};     // 1-based epoch held; 0 = free
  std::atomic<std::uint32_t> consumed{1};  // set by the parent after evaluating
  double time = 0;                         // seconds since start when taken
  std::uint64_t samples = 0;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// SIGINT/SIGTERM while training: the first asks everything to stop (the trainer
// notices within one poll, or within one mini-batch in serial mode); a second
// SIGINT exits at once. Nothing can leak either way: the arena has no name left,
// and workers die with the parent.
volatile sig_atomic_t g_signal = 0;
std::atomic<std::int32_t>* g_stop = nullptr;

extern "C" void on_stop_signal(int sig) {
  if (g_signal == SIGINT && sig == SIGINT) _exit(kExitInterrupted);
  g_signal = sig;
  if (g_stop) g_stop->store(1, std::memory_order_relaxed);
}

class SignalScope {
 public:
  explicit SignalScope(std::atomic<std::int32_t>* stop) {
    g_signal = 0;
    g_stop = stop;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_stop = nullptr;
  }
  static void throw_if_signalled() {
    if (g_signal) throw Interrupted(g_signal);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

void sleep_ms(int ms) {
  timespec ts{0, ms * 1000000L};
  nanosleep(&ts, nullptr);  // a signal cuts it short, which is what we want
}

std::string block_name(const std::string& tensor) { return "param:" + tensor; }
std::string state_block_name(const std::string& tensor) { return "state:" + tensor; }

void initialise(const ParamSet& p, const std::vector<TensorSpec>& specs, std::uint64_t seed) {
  Rng rng(seed ^ 0x5eedf00dULL);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    float* d = p.data(i);
    const Init init = specs[i].init;
    for (std::size_t j = 0; j < specs[i].size; ++j) {
      switch (init.kind) {
        case Init::zeros: d[j] = 0; break;
        case Init::normal: d[j] = static_cast<float>(rng.normal() * init.scale); break;
        case Init::uniform: d[j] = static_cast<float>((2 * rng.uniform() - 1) * init.scale); break;
      }
    }
  }
}

Problem make_problem(const Dataset& train, const Dataset* test, const LabelMap& labels) {
  Problem p;
  p.layout = train.layout();
  p.features = train.cols();
  p.classes = labels.classes();
  if (test) {
    if (test->layout() != train.layout())
      throw ConfigError(fmt::format("{} has {} rows but {} has {} rows", train.source(),
                                    to_string(train.layout()), test->source(),
                                    to_string(test->layout())));
    if (train.layout() == Layout::dense && test->cols() != train.cols())
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

// Everything one run needs, set up by the parent before any fork.
struct Run {
  const TrainConfig& cfg;
  Model& model;
  const Dataset& train;
  const Dataset* test;
  std::vector<float> train_targets, test_targets;
  std::vector<TensorSpec> specs;
  Arena arena;
  Control* control = nullptr;
  std::span<WorkerProgress> progress;
  std::span<double> epoch_loss;  // [worker * epochs + epoch]
  std::span<std::atomic<std::uint32_t>> finishers;  // workers done with each epoch
  SnapshotSlot* slots[2] = {nullptr, nullptr};
  ParamSet slot_params[2];
  ParamSet params;
  unsigned workers = 1;
  std::size_t classes = 0;

  Run(const TrainConfig& c, Model& m, const Dataset& tr, const Dataset* te)
      : cfg(c), model(m), train(tr), test(te) {
    const LabelMap labels = LabelMap::fit(model.label_kind(), train, model.name());
    train_targets = labels.targets(train);
    if (test) test_targets = labels.targets(*test);
    classes = labels.classes();
    model.configure(make_problem(train, test, labels));
    specs = model.parameters();
    workers = cfg.mode == Mode::serial ? 1 : cfg.workers;

    std::vector<BlockSpec> blocks{
        {"control", sizeof(Control)},
        {"progress", sizeof(WorkerProgress) * workers},
        {"epoch_loss", sizeof(double) * workers * cfg.epochs},
    };
    std::size_t floats = 0;
    const bool stateful = has_state(cfg.optimizer);
    for (auto& s : specs) {
      blocks.push_back({block_name(s.name), s.size * sizeof(float)});
      if (stateful) blocks.push_back({state_block_name(s.name), s.size * sizeof(float)});
      floats += (s.size + 15) / 16 * 16;
    }
    if (cfg.mode != Mode::serial) {
      blocks.push_back({"finishers", sizeof(std::uint32_t) * cfg.epochs});
      for (const char* n : {"snapshot0", "snapshot1"})
        blocks.push_back({n, sizeof(SnapshotSlot) + floats * sizeof(float)});
    }
    arena = Arena::create(blocks, ArenaOptions{cfg.shm_dir, cfg.huge_pages});
    control = new (arena.block("control").data()) Control();
    control->mutex.init();
    auto pb = arena.block("progress");
    progress = {new (pb.data()) WorkerProgress[workers], workers};
    epoch_loss = arena.array<double>("epoch_loss");
    std::vector<ParamSet::Tensor> t;
    for (auto& s : specs)  // state blocks start zeroed, as AdaGrad's accumulators must
      t.push_back({s.name, arena.array<float>(block_name(s.name)).data(), s.size,
                   stateful ? arena.array<float>(state_block_name(s.name)).data() : nullptr});
    params = ParamSet(std::move(t));
    initialise(params, specs, cfg.seed);
    if (arena.has("finishers")) {
      auto fb = arena.block("finishers");
      finishers = {new (fb.data()) std::atomic<std::uint32_t>[cfg.epochs], cfg.epochs};
      for (int i = 0; i < 2; ++i) {
        auto b = arena.block(i ? "snapshot1" : "snapshot0");
        slots[i] = new (b.data()) SnapshotSlot();
        auto* data = reinterpret_cast<float*>(b.data() + sizeof(SnapshotSlot));
        std::vector<ParamSet::Tensor> st;
        for (auto& s : specs) {
          st.push_back({s.name, data, s.size});
          data += (s.size + 15) / 16 * 16;
        }
        slot_params[i] = ParamSet(std::move(st));
      }
    }
  }

  // Called by a worker after publishing epoch e: the last one to finish copies the
  // weights into the slot of epoch e, if the parent is done with that slot.
  void snapshot_if_last(unsigned e) {
    if (finishers.empty() || !test) return;  // nothing would evaluate the snapshot
    if (finishers[e].fetch_add(1, std::memory_order_acq_rel) + 1 != workers) return;
    SnapshotSlot& slot = *slots[e % 2];
    if (slot.epoch.load(std::memory_order_acquire) != 0 &&
        !slot.consumed.load(std::memory_order_acquire))
      return;  // the parent still reads it: that epoch falls back to the live weights
    slot.epoch.store(0, std::memory_order_relaxed);
    const ParamSet& dst = slot_params[e % 2];
    for (std::size_t t = 0; t < params.count(); ++t) {
      const float* from = params.data(t);  // hoisted: the stores below may alias them
      float* to = dst.data(t);
      for (std::size_t i = 0, n = params.size(t); i < n; ++i) to[i] = detail::relaxed_load(from + i);
    }
    slot.time = static_cast<double>(now_ns() - control->start_ns) * 1e-9;
    slot.samples = samples();
    slot.consumed.store(0, std::memory_order_relaxed);
    slot.epoch.store(e + 1, std::memory_order_release);
  }

  // Rows [begin, end) of the training set owned by worker `rank`.
  std::pair<std::size_t, std::size_t> partition(unsigned rank) const {
    const std::size_t n = train.rows();
    return {n * rank / workers, n * (rank + 1) / workers};
  }

  // A worker's own rows, in the order of its first shuffle's input.
  std::vector<std::uint32_t> rows_of(unsigned rank) const {
    auto [begin, end] = partition(rank);
    std::vector<std::uint32_t> rows(end - begin);
    std::iota(rows.begin(), rows.end(), static_cast<std::uint32_t>(begin));
    return rows;
  }

  // One epoch of worker `rank`: shuffle its partition (the stream of seed + rank
  // continues across epochs), train, publish the epoch's loss and then, with
  // release order, the epoch count the parent waits on.
  void run_epoch(unsigned rank, unsigned e, std::vector<std::uint32_t>& rows, Rng& rng) {
    rng.shuffle(std::span<std::uint32_t>(rows));
    EpochTask task;
    task.data = &train;
    task.targets = train_targets.data();
    task.rows = rows;
    task.batch = cfg.batch;
    task.step_size = cfg.step_size;
    task.epoch = e;
    task.workers = workers;
    task.optimizer = cfg.optimizer;
    task.params = params;
    task.progress = &progress[rank];
    task.mutex = &control->mutex;
    task.stop = &control->stop;
    epoch_loss[rank * cfg.epochs + e] = model.train_epoch(cfg.mode, task);
    if (control->stop.load(std::memory_order_relaxed)) return;  // epoch cut short
    snapshot_if_last(e);  // before epochs_done: the parent then finds the slot ready
    progress[rank].epochs_done.store(e + 1, std::memory_order_release);
  }

  // The body of a forked worker.
  int work(unsigned rank) {
    auto rows = rows_of(rank);
    Rng rng(cfg.seed + rank);
    progress[rank].pid.store(getpid(), std::memory_order_relaxed);
    if (cfg.pin) detail::pin_to_cpu(rank);
    for (unsigned e = 0; e < cfg.epochs && !control->stop.load(std::memory_order_relaxed); ++e)
      run_epoch(rank, e, rows, rng);
    progress[rank].finish_ns.store(now_ns(), std::memory_order_relaxed);
    progress[rank].pss_bytes.store(detail::self_pss_bytes(), std::memory_order_relaxed);
    progress[rank].private_bytes.store(detail::self_private_bytes(), std::memory_order_relaxed);
    return 0;
  }

  Evaluation evaluate(const ParamSet& p) const {
    if (!test) return {};
    return model.evaluate(p, *test, test_targets.data());
  }
  Evaluation evaluate_live() const {
    if (!test) return {};
    ParamSnapshot snap(params);
    return evaluate(snap.params());
  }

  // The snapshot slot holding epoch e (1-based), or null.
  SnapshotSlot* slot_for(unsigned e) const {
    if (finishers.empty()) return nullptr;
    SnapshotSlot* s = slots[(e - 1) % 2];
    return s->epoch.load(std::memory_order_acquire) == e ? s : nullptr;
  }

  // Mean progressive loss of epoch e (0-based) over all workers.
  double train_loss(unsigned e) const {
    double loss = 0;
    for (unsigned w = 0; w < workers; ++w) loss += epoch_loss[w * cfg.epochs + e];
    return train.rows() ? loss / static_cast<double>(train.rows()) : 0;
  }

  std::uint64_t samples() const {
    std::uint64_t s = 0;
    for (auto& p : progress) s += p.samples.load(std::memory_order_relaxed);
    return s;
  }

  unsigned min_epochs() const {
    unsigned m = cfg.epochs;
    for (auto& p : progress) m = std::min(m, p.epochs_done.load(std::memory_order_acquire));
    return m;
  }
};

void check_finite(const Progress& p) {
  if (!std::isfinite(p.train_loss))
    throw Error(fmt::format(
        "training diverged: the training loss is {} after epoch {}; try a smaller --lr",
        p.train_loss, p.epoch), kExitFailure);
}

}  // namespace

void TrainConfig::validate() const {
  if (mode != Mode::serial && workers == 0) throw ConfigError("--workers must be at least 1");
  if (workers > 1024) throw ConfigError(fmt::format("--workers {} is absurd (at most 1024)", workers));
  if (epochs == 0) throw ConfigError("--epochs must be at least 1");
  if (epochs > 1000000) throw ConfigError("--epochs must be at most 1000000");
  if (!(step_size.lr0 > 0) || !std::isfinite(step_size.lr0))
    throw ConfigError(fmt::format("--lr must be a positive number, got {}", step_size.lr0));
  if (!(step_size.decay > 0 && step_size.decay <= 1))
    throw ConfigError(fmt::format("--lr-decay must be in (0, 1], got {}", step_size.decay));
  if (!(step_size.inverse_scale >= 0))
    throw ConfigError("--lr-inverse must be >= 0");
  if (batch == 0) throw ConfigError("--batch must be at least 1");
  if (!(model_options.l2 >= 0) || !std::isfinite(model_options.l2))
    throw ConfigError(fmt::format("--l2 must be >= 0, got {}", model_options.l2));
  if (!(eval_every >= 0)) throw ConfigError("--eval-every must be >= 0");
  if (model_options.hot_flush == 0) throw ConfigError("--hot-flush must be at least 1");
  if (model_options.hot_k > 0 && optimizer != Optimizer::sgd)
    throw ConfigError("--hot-k works with --optimizer sgd only");
}

TrainResult train(const TrainConfig& config, const Dataset& train_set, const Dataset* test,
                  const ProgressCallback& on_progress) {
  config.validate();
  auto model = make_model(config.model, config.model_options);
  return train(config, *model, train_set, test, on_progress);
}

TrainResult train(const TrainConfig& cfg, Model& model, const Dataset& train_set,
                  const Dataset* test, const ProgressCallback& on_progress) {
  cfg.validate();
  if (train_set.rows() == 0) throw ConfigError(train_set.source() + " has no rows");
  if (cfg.mode != Mode::serial && cfg.workers > train_set.rows())
    throw ConfigError(fmt::format("--workers {} is more than the {} training rows", cfg.workers,
                                  train_set.rows()));
  Run run(cfg, model, train_set, test);
  SignalScope signals(&run.control->stop);
  TrainResult result;
  result.classes = run.classes;
  const auto t0 = Clock::now();
  run.control->start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  double paused = 0;  // serial mode: evaluation time, not counted as training
  auto report = [&](double epoch, bool end_of_epoch, unsigned last_epoch) {
    Progress p;
    p.time = seconds_since(t0) - paused;
    p.epoch = epoch;
    p.samples = run.samples();
    p.train_loss = last_epoch ? run.train_loss(last_epoch - 1) : std::nan("");
    SnapshotSlot* slot = end_of_epoch ? run.slot_for(last_epoch) : nullptr;
    if (slot) {
      p.time = slot->time;
      p.samples = slot->samples;
      p.test = run.evaluate(run.slot_params[(last_epoch - 1) % 2]);
      slot->consumed.store(1, std::memory_order_release);
    } else {
      p.test = cfg.mode == Mode::serial ? run.evaluate(run.params) : run.evaluate_live();
    }
    const double t = p.time;
    p.samples_per_second = t > 0 ? static_cast<double>(p.samples) / t : 0;
    p.end_of_epoch = end_of_epoch;
    if (end_of_epoch) check_finite(p);
    result.history.push_back(p);
    if (on_progress) on_progress(p);
  };

  if (cfg.mode == Mode::serial) {
    auto rows = run.rows_of(0);
    Rng rng(cfg.seed);
    for (unsigned e = 0; e < cfg.epochs; ++e) {
      run.run_epoch(0, e, rows, rng);
      SignalScope::throw_if_signalled();
      const auto pause_start = Clock::now();
      report(e + 1, true, e + 1);
      paused += seconds_since(pause_start);
    }
  } else {
    detail::ProcessGroup group;
    for (unsigned r = 0; r < run.workers; ++r) group.spawn(r, [&run, r] { return run.work(r); });
    unsigned evaluated = 0;
    double next_timed = cfg.eval_every;
    for (;;) {
      for (const auto& exit : group.reap()) {
        if (exit.ok()) continue;
        run.control->stop.store(1, std::memory_order_relaxed);
        group.kill_all(SIGKILL);
        group.wait_all();
        SignalScope::throw_if_signalled();
        throw WorkerError(fmt::format("worker {} (pid {}) {}", exit.rank, exit.pid, exit.describe()));
      }
      SignalScope::throw_if_signalled();  // ~ProcessGroup kills and reaps the workers
      const unsigned done = run.min_epochs();
      while (evaluated < done) {
        ++evaluated;
        report(evaluated, true, evaluated);
      }
      if (group.running() == 0) break;
      if (cfg.eval_every > 0 && evaluated < cfg.epochs && seconds_since(t0) >= next_timed) {
        next_timed = seconds_since(t0) + cfg.eval_every;
        report(static_cast<double>(run.samples()) / static_cast<double>(train_set.rows()), false,
               evaluated);
      }
      sleep_ms(10);
    }
    if (evaluated < cfg.epochs)
      throw WorkerError(fmt::format("workers ended after {} of {} epochs", evaluated, cfg.epochs));
  }

  double elapsed = seconds_since(t0) - paused;
  if (cfg.mode != Mode::serial) {  // the last worker's finish, not when the parent noticed
    std::int64_t last = 0;
    for (auto& p : run.progress) last = std::max(last, p.finish_ns.load(std::memory_order_relaxed));
    if (last > run.control->start_ns) elapsed = static_cast<double>(last - run.control->start_ns) * 1e-9;
  }
  result.train_seconds = elapsed;
  result.samples = run.samples();
  result.samples_per_second = elapsed > 0 ? static_cast<double>(result.samples) / elapsed : 0;
  const double mean_nnz = static_cast<double>(train_set.nnz()) / static_cast<double>(train_set.rows());
  result.nnz_per_second = result.samples_per_second * mean_nnz;
  result.test = result.history.back().test;
  result.train_loss = result.history.back().train_loss;
  result.lock_recoveries = run.control->mutex.recoveries();
  // The parent maps everything the workers share (data, arena) and each worker adds
  // its private pages. (Summing PSS taken at different exits counted shared pages
  // several times over: a page's share grows as its other mappers exit.)
  std::uint64_t tree = detail::self_peak_rss_bytes();
  for (auto& p : run.progress) tree += p.private_bytes.load(std::memory_order_relaxed);
  result.peak_rss_bytes = tree;
  result.huge_pages = run.arena.huge_pages();
  for (const auto& t : run.params.tensors()) {
    result.parameters[t.name].assign(t.data, t.data + t.size);
    if (t.state) result.optimizer_state[t.name].assign(t.state, t.state + t.size);
  }
  return result;
}

}  // namespace hogwild
