// The supervising parent: forks the workers, polls them, evaluates, writes
// checkpoints, respawns a crashed worker, and turns SIGINT/SIGTERM into an orderly
// stop. The shared state and the worker body are in trainer/run.{hpp,cpp}.
#include "hogwild/trainer.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "comm/gloo.hpp"
#include "comm/nccl.hpp"
#include "data/file_io.hpp"
#include "science/conflicts.hpp"
#include "hogwild/checkpoint.hpp"
#include "hogwild/error.hpp"
#include "device/device_backend.hpp"
#include "device/kernel_registry.hpp"
#include "hogwild/metrics.hpp"
#include "memory/param_snapshot.hpp"
#include "modes/hogwild/layout_probe.hpp"
#include "process.hpp"
#include "trainer/live_meter.hpp"
#include "trainer/memory_meter.hpp"
#include "trainer/weights_digest.hpp"
#include "trainer/run.hpp"
#include "trainer/work_share.hpp"
#include "trainer/worker_start.hpp"

namespace hogwild {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// SIGINT/SIGTERM while training: the first asks everything to stop (workers see
// the flag within one mini-batch; the parent says so, then writes the final
// checkpoint and summary and returns). A second one exits at once, removing a
// checkpoint's temporary file if one is being written, but only once the stop has
// been said and a moment (kForceAfterSeconds) after the first: timeout(1) signals
// its child and then the child's group, and systemd and Slurm signal the group, so
// one stop often arrives twice at once. Nothing else can leak: the arena has no name
// left, and workers die with the parent.
constexpr double kForceAfterSeconds = 0.25;
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_stop_said = 0;
timespec g_first_signal{};
// The run in progress's stop flag (set by RunStop for the run, whether or not it
// handles signals): the signal handler's, and request_stop's.
std::atomic<std::int32_t>* g_stop = nullptr;

extern "C" void on_stop_signal(int sig) {
  if (g_signal) {
    if (sig == SIGPIPE || sig == SIGXFSZ) return;  // (request_stop's: never a second signal)
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
    const double since = static_cast<double>(now.tv_sec - g_first_signal.tv_sec) +
                         static_cast<double>(now.tv_nsec - g_first_signal.tv_nsec) * 1e-9;
    if (!g_stop_said || since < kForceAfterSeconds) return;  // the same stop, sent twice
    detail::remove_pending_temporary();
    _exit(128 + sig);  // (130 SIGINT, 143 SIGTERM, 129 SIGHUP: the shell's numbers)
  }
  clock_gettime(CLOCK_MONOTONIC, &g_first_signal);
  g_signal = sig;
  if (g_stop) g_stop->store(1, std::memory_order_relaxed);
  // Said here, whatever the parent is doing (an evaluation, the last checkpoint):
  // write(2) is async-signal-safe.
  static constexpr char kInt[] =
      "hogwild: stopping (SIGINT): the workers end their batch, then the final checkpoint "
      "and summary are written; a second signal skips that\n";
  static constexpr char kTerm[] =
      "hogwild: stopping (SIGTERM): the workers end their batch, then the final checkpoint "
      "and summary are written; a second signal skips that\n";
  static constexpr char kHup[] =
      "hogwild: stopping (SIGHUP: the terminal hung up): the workers end their batch, then the "
      "final checkpoint and summary are written; a second signal skips that\n";
  static constexpr char kPipe[] =
      "hogwild: stopping (standard output closed): the workers end their batch, then the "
      "final checkpoint and summary are written\n";
  static constexpr char kFull[] =
      "hogwild: stopping (an output's disk is full): the workers end their batch, then the "
      "final checkpoint and summary are written\n";
  const int saved = errno;
  if (sig == SIGINT)
    (void)!::write(STDERR_FILENO, kInt, sizeof kInt - 1);
  else if (sig == SIGPIPE)
    (void)!::write(STDERR_FILENO, kPipe, sizeof kPipe - 1);
  else if (sig == SIGXFSZ)
    (void)!::write(STDERR_FILENO, kFull, sizeof kFull - 1);
  else if (sig == SIGHUP)
    (void)!::write(STDERR_FILENO, kHup, sizeof kHup - 1);
  else
    (void)!::write(STDERR_FILENO, kTerm, sizeof kTerm - 1);
  errno = saved;
  g_stop_said = 1;
}

// A stop asked for before g_stop was set (from the run's on_start callback),
// applied once it is.
volatile sig_atomic_t g_requested = 0;
struct RunStop {
  explicit RunStop(std::atomic<std::int32_t>* stop) noexcept { g_stop = stop; }
  ~RunStop() { g_stop = nullptr; }
  RunStop(const RunStop&) = delete;
  RunStop& operator=(const RunStop&) = delete;
};

class SignalScope {
 public:
  SignalScope() {
    g_signal = 0;
    g_stop_said = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    // A signal the process was started ignoring stays ignored: a shell starts a
    // background job (`cmd &` in a script) with SIGINT ignored, so that a ^C meant
    // for the foreground does not reach it (a sweep's runs, behind a ^C'd script).
    // (nohup starts a program with SIGHUP ignored: it stays so.)
    sigaction(SIGINT, nullptr, &old_int_);
    sigaction(SIGTERM, nullptr, &old_term_);
    sigaction(SIGHUP, nullptr, &old_hup_);
    if (old_int_.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, nullptr);
    if (old_term_.sa_handler != SIG_IGN) sigaction(SIGTERM, &sa, nullptr);
    if (old_hup_.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, nullptr);
  }
  ~SignalScope() {
    // After a stop the handlers stay: a second signal while the caller still writes
    // what the stop leaves (the summary, the last line) exits 130/143, as during it,
    // instead of killing the process by the signal's default action.
    if (g_signal) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {}, old_hup_ {};
};

void sleep_ms(int ms) {
  timespec ts{0, ms * 1000000L};
  nanosleep(&ts, nullptr);  // a signal cuts it short, which is what we want
}

class Supervisor {
 public:
  Supervisor(detail::Run& run, const ProgressCallback& cb, const LiveCallback& on_live,
             double resumed_seconds, unsigned restarts)
      : run_(run), live_(run, on_live), cfg_(run.cfg), on_progress_(cb),
        resumed_seconds_(resumed_seconds), restarts_(restarts) {
    run_.control->start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 t0_.time_since_epoch()).count();
    evaluated_ = run_.min_epochs();
    base_samples_ = run_.samples();
    last_samples_ = base_samples_;
    result_.classes = run_.classes;
    result_.resumed_epochs = evaluated_;
    // (The first memory sample is taken after the first epoch or worker exit, and at
    // the end, when the parent still holds its arena and rows: one at the start read
    // nothing those miss and cost a Python parent 1.5 ms of every run.)
  }

  TrainResult go() {
    if (!run_.mode.parallel())
      serial();
    else
      parallel();
    return finish();
  }

 private:
  void serial() {
    for (unsigned e = run_.progress[0].epochs_done.load(); e < cfg_.epochs; ++e) {
      {
        // The only poll while the parent trains: the live display and the memory.
        std::jthread ticker([this, paused = paused_](std::stop_token stop) { tick(stop, paused); });
        run_.run_epoch(0, e);
      }  // joined: the live callback has returned before the epoch's report
      if (g_signal) return;
      const auto pause_start = Clock::now();
      evaluated_ = e + 1;
      report(e + 1, true);
      if (meter_.due()) meter_.sample_alone();  // after the epoch's evaluation
      checkpoint_if_due();
      paused_ += seconds_since(pause_start);
    }
  }

  void parallel() {
    const bool served = cfg_.worker_start == WorkerStart::fork_server;
    detail::ProcessGroup group(served ? detail::ForkServer::get() : nullptr);
    detail::Run& run = run_;
    // --stall-timeout: each worker's examples, and since when they have not moved.
    struct Watch {
      std::uint64_t samples = 0;
      Clock::time_point since;
      pid_t pid = 0;
    };
    std::vector<Watch> watch(run_.workers + run_.servers);
    const bool watch_stalls = cfg_.stall_timeout > 0 && !run_.mode.workers_wait() &&
                              cfg_.nodes == 1;
    auto spawn = [&](unsigned r) {
      const pid_t pid = described_ ? group.start(r, described_->description(), described_->fds())
                                  : group.spawn(r, [&run, r] { return run.work(r); });
      watch[r] = {run_.progress[r].samples.load(std::memory_order_relaxed), Clock::now(), pid};
    };
    if (cfg_.nodes > 1) run_.publish_fingerprint();  // each worker's node check uses it
    for (unsigned r = 0; r < run_.workers + run_.servers; ++r) spawn(r);
    run_.arena.map_all();  // while the workers start (ArenaOptions::map_now)
    double next_timed = cfg_.eval_every;
    for (;;) {
      std::uint64_t gone = 0;  // what workers that ended held at their exit
      for (const auto& exit : group.reap()) {
        if (exit.rank < run_.workers)
          gone += run_.progress[exit.rank].exit_memory.exchange(0, std::memory_order_relaxed);
        if (exit.ok() || g_signal) continue;
        // A parameter server on one machine: its shard and rings are in the arena,
        // so a replacement takes over where it stopped (finishing the record it
        // died in, exactly once). Across nodes its Gloo group is broken: the run ends.
        if (exit.rank >= run_.workers && cfg_.nodes == 1 && restarts_ < cfg_.max_restarts) {
          ++restarts_;
          std::fprintf(stderr, "hogwild: parameter server %u (pid %d) %s; restarting it on its "
                       "shard, which the arena kept (restart %u of at most %u)\n",
                       exit.rank - run_.workers, exit.pid, exit.describe().c_str(), restarts_,
                       cfg_.max_restarts);
          spawn(exit.rank);
          report(fraction(), false, true);
          continue;
        }
        if (exit.rank >= run_.workers) {  // a parameter server: its shard is gone
          run_.control->stop.store(1, std::memory_order_relaxed);
          group.kill_all(SIGKILL);
          group.wait_all();
          throw_if_unreachable();
          throw WorkerError(fmt::format(
              "parameter server {} (pid {}) {}; {}", exit.rank - run_.workers, exit.pid,
              exit.describe(),
              cfg_.nodes > 1 ? "its node's servers exchange with the other nodes' in rounds that "
                               "cannot take a replacement, so the run stopped"
              : cfg_.max_restarts ? fmt::format("giving up after {} restart(s) (--max-restarts {})",
                                                restarts_, cfg_.max_restarts)
                                  : std::string("--max-restarts 0, so the run stopped")));
        }
        // The others are out of step without it (a parameter server's replica talks
        // to its own node's servers only: it is respawned alone).
        if (run_.mode.synchronous() || (cfg_.nodes > 1 && !run_.mode.joins_nodes())) {
          restart_all(group, exit);
          for (unsigned r = 0; r < run_.workers; ++r) spawn(r);
          report(fraction(), false, true);
          break;  // the old workers' exits are history
        }
        if (restarts_ >= cfg_.max_restarts) {
          run_.control->stop.store(1, std::memory_order_relaxed);
          group.kill_all(SIGKILL);
          group.wait_all();
          throw WorkerError(fmt::format(
              "worker {} (pid {}) {}{}", exit.rank, exit.pid, exit.describe(),
              cfg_.max_restarts ? fmt::format("; giving up after {} restart(s) (--max-restarts {})",
                                              restarts_, cfg_.max_restarts)
                                : std::string()));
        }
        ++restarts_;
        const auto& p = run_.progress[exit.rank];
        const std::string lost = run_.mode.worker_died(run_.arena, exit.rank);
        const std::string where =
            p.epochs_done.load() >= cfg_.epochs
                ? std::string("past its last epoch (to end or take rows of a slower worker's share)")
                : fmt::format("at epoch {}, row {}", p.epochs_done.load() + 1, p.position.load());
        std::fprintf(stderr, "hogwild: worker %u (pid %d) %s%s; restarting it %s (restart %u of at "
                     "most %u)\n", exit.rank, exit.pid, exit.describe().c_str(), lost.c_str(),
                     where.c_str(), restarts_, cfg_.max_restarts);
        spawn(exit.rank);
        report(fraction(), false, true);  // a metrics line records the restart
      }
      meter_.gone(gone);
      if (meter_.due()) meter_.sample(processes(group));
      if (g_signal) return stop(group);
      if (watch_stalls) check_stalls(group, watch);
      unsigned done = run_.min_epochs();  // not re-read: fast epochs must not starve the loop
      if (run_.servers && done == cfg_.epochs && group.running() > 0)
        done = cfg_.epochs - 1;  // the last once the services (ps: servers) are done (below)
      while (evaluated_ < done && !g_signal) {  // a slow callback: a stop is not queued
        ++evaluated_;                             // behind every epoch still to report
        report(evaluated_, true);
      }
      if (group.running() == 0) break;
      if (cfg_.eval_every > 0 && evaluated_ < cfg_.epochs && seconds_since(t0_) >= next_timed) {
        next_timed = seconds_since(t0_) + cfg_.eval_every;
        report(fraction(), false);
      }
      checkpoint_if_due();
      live_.tick(seconds_since(t0_));
      group.wait(poll_ms(done));  // the last worker's exit ends it at once: no tail on every run
    }
    workers_gone_ = true;  // the live weights hold still: evaluated where they are
    for (const unsigned done = run_.min_epochs(); evaluated_ < done && !g_signal;)
      report(++evaluated_, true);  // a parameter server's last epoch, or epochs a slow
                                   // callback has not seen yet: a stop ends them
    if (g_signal) return;
    if (evaluated_ < cfg_.epochs)
      throw WorkerError(fmt::format("workers ended after {} of {} epochs", evaluated_, cfg_.epochs));
  }

  // How long the parent sleeps between looks: a quarter of an epoch, from 1 to 10
  // ms. An epoch's snapshot waits in one of two slots, which the epoch two later
  // takes again only once the parent has evaluated it; an epoch whose slot is still
  // held is evaluated on the live weights, later than its end. SpamAssassin's
  // epochs last 2-3 ms: at a 10 ms poll, 283 of 300 evaluations (5 runs of 60
  // epochs, two workers) were of weights later than the epoch after theirs, and 25
  // went back in time past the one before. Until the first epoch ends, the run so
  // far is the epoch's least length.
  int poll_ms(unsigned done) const {
    const double epoch_s = seconds_since(t0_) / std::max(1u, done - std::min(done, result_.resumed_epochs));
    return std::clamp(static_cast<int>(epoch_s * 1000 / 4), 1, 10);
  }

  // The running workers and servers, for the memory meter: a worker that has
  // finished says what it held as it did.
  std::vector<detail::TreeMeter::Process> processes(const detail::ProcessGroup& group) const {
    std::vector<detail::TreeMeter::Process> out;
    for (const pid_t pid : group.pids()) {
      std::uint64_t exit_sample = 0;
      for (const auto& p : run_.progress)
        if (p.pid.load(std::memory_order_relaxed) == pid)
          exit_sample = p.exit_memory.load(std::memory_order_relaxed);
      out.push_back({pid, exit_sample});
    }
    return out;
  }

  // A worker lost a peer on another machine (a cut link, a node down): the run ends
  // with what it said, as a new group would wait for that peer again.
  void throw_if_unreachable() const {
    if (run_.control->unreachable_state.load(std::memory_order_acquire) == 2)
      throw WorkerError(fmt::format("{}; no restart was tried, as a new group would wait for it "
                                    "again", run_.control->unreachable));
  }

  // A synchronous mode's worker failed: the others stop at their next collective
  // (the stop flag), and the whole group starts again from the place every worker
  // had reached (torchelastic's restart of the job): the weights are those of the
  // last step, and at most the mini-batches since the last published place are
  // trained again. With no restart left, the run fails naming the worker.
  void restart_all(detail::ProcessGroup& group, const detail::WorkerExit& failed) {
    auto& control = *run_.control;
    control.stop.store(1, std::memory_order_relaxed);
    // A worker that another waited for until the timeout, alone still running when
    // the rest have stopped: stopped, traced or stuck, the stop flag does not reach it.
    pid_t late_pid = 0;
    auto only_the_late_one = [&] {
      const std::int32_t late = control.waited_for.load(std::memory_order_relaxed);
      const auto running = group.running_workers();
      if (late < 0 || running.size() != 1 || running[0].first != static_cast<unsigned>(late))
        return false;
      late_pid = running[0].second;
      return true;
    };
    const auto start = Clock::now();
    const auto give_up = start + std::chrono::duration<double>(cfg_.comm_timeout + 5);
    // Across nodes the late one may be in a collective with the other nodes, begun
    // after the wait for it was: that one times out by itself (and says which peer
    // it lost) within the timeout and the second its peers' reports take.
    const auto its_own =
        start + std::chrono::duration<double>(cfg_.nodes > 1 ? cfg_.comm_timeout + 2 : 0);
    bool stuck = false;
    while (group.running() > 0 && Clock::now() < give_up &&
           !(stuck = Clock::now() >= its_own && only_the_late_one())) {
      group.reap();
      if (group.running() > 0) sleep_ms(5);
    }
    group.kill_all(SIGKILL);
    group.wait_all();
    throw_if_unreachable();
    // The worker to name: the one another waited for in vain, not the one that waited.
    std::string what = fmt::format("worker {} (pid {}) {}", failed.rank, failed.pid, failed.describe());
    const std::int32_t late = control.waited_for.exchange(-1, std::memory_order_relaxed);
    const std::int32_t waiter = control.waiter.exchange(-1, std::memory_order_relaxed);
    if (stuck)
      what = fmt::format("worker {} (pid {}) did not reach a collective that worker {} waited {} s "
                         "for (--comm-timeout), and did not stop with the others: it is stopped, "
                         "traced or stuck", late, late_pid, waiter, cfg_.comm_timeout);
    if (WIFEXITED(failed.status) && WEXITSTATUS(failed.status) == kExitBadInput) {
      const bool said = run_.control->bad_input_state.load(std::memory_order_acquire) == 2;
      throw Error(fmt::format("worker {} stopped on bad input or options{}; nothing was restarted",
                              failed.rank,
                              said ? fmt::format(" ({})", run_.control->bad_input)
                                   : std::string(" (its message is above)")),
                  kExitBadInput);
    }
    if (!run_.mode.synchronous())  // a node's lone respawn cannot rejoin the other nodes
      throw WorkerError(fmt::format("{}; hogwild across nodes does not replace a worker, so this "
                                    "node stopped", what));
    if (restarts_ >= cfg_.max_restarts)
      throw WorkerError(fmt::format(
          "{}; --mode {} steps all workers together, so every worker stopped{}", what,
          to_string(cfg_.mode),
          cfg_.max_restarts ? fmt::format(" (giving up after {} restart(s), --max-restarts {})",
                                          restarts_, cfg_.max_restarts)
                            : std::string()));
    ++restarts_;
    const auto [epoch, position] = run_.align_workers();
    std::fprintf(stderr, "hogwild: %s; restarting all %u workers at epoch %u, row %llu of each "
                 "(restart %u of at most %u)\n", what.c_str(), run_.workers, epoch + 1,
                 static_cast<unsigned long long>(position), restarts_, cfg_.max_restarts);
    run_.control->stop.store(0, std::memory_order_relaxed);
  }

  // Serial mode's ticker thread: `paused` is the evaluation time before this epoch.
  void tick(std::stop_token stop, double paused) {
    std::mutex m;
    std::condition_variable_any cv;  // only to wait for the stop request
    std::unique_lock lock(m);
    while (!cv.wait_for(lock, stop, std::chrono::milliseconds(50), [] { return false; }) &&
           !stop.stop_requested()) {
      if (live_) live_.tick(seconds_since(t0_) - paused);
      if (meter_.due()) meter_.sample({});  // the epoch's order and buffers
    }
  }

  // SIGINT/SIGTERM: the stop flag is set; workers publish their place and exit 0
  // (143 when a process-group SIGTERM reached them too).
  // A running worker whose examples have not moved for --stall-timeout seconds is
  // said and killed: the reap then respawns it (under --max-restarts), or the run
  // fails naming it.
  template <class Watch>
  void check_stalls(detail::ProcessGroup& group, std::vector<Watch>& watch) {
    const auto now = Clock::now();
    // A gap since the last look means the parent did not run either (the whole job
    // suspended: ^Z, Slurm's suspend) or was busy: no worker is judged by it.
    if (now - last_stall_check_ > std::chrono::seconds(2))
      for (auto& w : watch) w.since = now;
    last_stall_check_ = now;
    // --balance steal: a worker past its last epoch is watched while it holds rows of
    // another's share; an owner that waits for its thief to hand them back is not
    // (its thief is).
    const std::vector<bool> holding = detail::thieves_holding(run_.progress);
    for (unsigned r = 0; r < run_.workers; ++r) {
      const auto& p = run_.progress[r];
      if (p.epochs_done.load(std::memory_order_acquire) >= cfg_.epochs && !holding[r]) continue;  // ending
      const detail::ShareWord share = detail::ShareWord::unpack(p.share.load(std::memory_order_acquire));
      if (share.thief != 0 && share.claimed == share.limit) {
        watch[r].since = now;
        continue;
      }
      const std::uint64_t samples = p.samples.load(std::memory_order_relaxed);
      if (samples != watch[r].samples) {
        watch[r].samples = samples;
        watch[r].since = now;
        continue;
      }
      const double idle = std::chrono::duration<double>(now - watch[r].since).count();
      if (idle < cfg_.stall_timeout) continue;
      const std::string where =
          holding[r] ? fmt::format("at row {} of the rows it took from another worker's share",
                                   p.position.load(std::memory_order_relaxed))
                     : fmt::format("in epoch {} at row {} of its share",
                                   p.epochs_done.load(std::memory_order_relaxed) + 1,
                                   p.position.load(std::memory_order_relaxed));
      const std::string what = fmt::format("worker {} (pid {}) finished no example for {:.1f} s "
                                           "(--stall-timeout {}), {}", r, watch[r].pid, idle,
                                           cfg_.stall_timeout, where);
      if (restarts_ < cfg_.max_restarts) {
        std::fprintf(stderr, "hogwild: %s: stalled (stopped, traced or stuck); killing it\n",
                     what.c_str());
        ::kill(watch[r].pid, SIGKILL);  // the reap respawns it
        watch[r].since = now;
        return;  // one a look: in lock mode the others may only wait for this one
      }
      run_.control->stop.store(1, std::memory_order_relaxed);
      group.kill_all(SIGKILL);
      group.wait_all();
      throw WorkerError(what + (cfg_.max_restarts
                                    ? fmt::format("; giving up after {} restart(s) (--max-restarts {})",
                                                  restarts_, cfg_.max_restarts)
                                    : std::string("; --max-restarts 0, so the run stopped")));
    }
  }

  void stop(detail::ProcessGroup& group) {
    for (int i = 0; i < 500 && group.running() > 0; ++i) {
      for (const auto& exit : group.reap())  // a clean stop exits 0, or 143 on SIGTERM
        if (!WIFEXITED(exit.status))
          std::fprintf(stderr, "hogwild: worker %u (pid %d) %s while the run stopped\n",
                       exit.rank, exit.pid, exit.describe().c_str());
      if (group.running() > 0) group.wait(10);
    }
    group.kill_all(SIGKILL);
    group.wait_all();
  }

  double fraction() const {
    return static_cast<double>(run_.samples()) / static_cast<double>(run_.train.rows());
  }

  // Evaluates the epoch's snapshot (end_of_epoch, when a worker took one) or a
  // copy of the live weights, stamped with what that copy holds (Progress).
  void report(double epoch, bool end_of_epoch, bool restart = false) {
    Progress p;
    p.epoch = epoch;
    p.restart = restart;
    p.restarts = restarts_;
    if (const auto t = run_.mode.clock(run_.arena)) p.simulated_time = *t;
    if (!run_.staleness.empty()) {
      const auto s = detail::summarize_staleness(run_.staleness, cfg_.telemetry_every);
      p.lag = s.lag;
      p.overlap = s.overlap;
    }
    p.train_loss = evaluated_ ? run_.train_loss(evaluated_ - 1) : std::nan("");
    detail::SnapshotSlot* slot = end_of_epoch ? run_.slot_for(evaluated_) : nullptr;
    const ParamSet* weights = &run_.params;
    detail::CaptureCounts counts;
    std::optional<detail::CaptureCounts> ended;  // no test set: the epoch's end
    if (slot) {
      counts = run_.counts_of(*slot);
      weights = &run_.slot_params[(evaluated_ - 1) % run_.slots.size()];
    } else if (end_of_epoch && (ended = run_.epoch_end(evaluated_))) {
      counts = std::move(*ended);
    } else if (run_.mode.parallel() && run_.test && !workers_gone_) {
      counts = run_.capture([&] { weights = &copy_of_live(); });
    } else {  // serial (the parent is the worker), no worker left, or nothing to evaluate
      counts = run_.capture([] {});
    }
    // No snapshot of the epoch: the live weights (or the final ones, the workers gone),
    // later than its end unless it is the last.
    p.late = end_of_epoch && !slot && run_.mode.parallel() && run_.test && evaluated_ < cfg_.epochs;
    p.time = counts.time - paused_;  // serial: evaluation pauses are not training
    p.worker_samples_min = counts.low;
    p.worker_samples_max = counts.high;
    for (std::uint64_t s : counts.low) p.samples_min += s;
    for (std::uint64_t s : counts.high) p.samples_max += s;
    p.samples = p.samples_min + (p.samples_max - p.samples_min) / 2;
    const auto eval_start = Clock::now();
    p.test = run_.evaluate(*weights);
    p.eval_seconds = seconds_since(eval_start);
    p.reported_time = seconds_since(t0_) - paused_;
    p.samples_per_second =
        p.time > 0 ? static_cast<double>(p.samples - std::min(p.samples, base_samples_)) / p.time
                   : 0;
    // Since the previous evaluation (at an epoch's end, per-epoch evaluations: that
    // epoch's); a restart's weights are no point of the run's pace.
    if (p.time > last_time_)
      p.recent_samples_per_second =
          static_cast<double>(p.samples - std::min(p.samples, last_samples_)) / (p.time - last_time_);
    if (!restart) {
      last_time_ = std::max(last_time_, p.time);
      last_samples_ = std::max(last_samples_, p.samples);
    }
    p.end_of_epoch = end_of_epoch;
    // Divergence shows in the losses: a non-finite weight that a row touches makes
    // that row's loss non-finite. The weights themselves are scanned only then (for
    // the message), before a checkpoint is written, and once at the end; scanning a
    // large model after every short epoch cost the parent a core.
    const bool bad_train = end_of_epoch && !std::isfinite(p.train_loss);
    const bool bad_test = p.test.rows > 0 && !std::isfinite(p.test.loss);
    if (bad_train || bad_test) {
      // Live, or a copy of only what the evaluation reads: every weight copied first
      // (a non-finite one that no test row reads still names itself).
      weights = run_.mode.parallel() && !workers_gone_ ? &copy_of_live(true) : &run_.params;
      const auto bad = detail::find_non_finite(*weights);
      throw detail::divergence(
          cfg_,
          bad ? "weight " + *bad
              : fmt::format("the {} loss is {}", bad_train ? "training" : "test",
                            bad_train ? p.train_loss : p.test.loss),
          epoch, p.samples);
    }
    if (slot) slot->consumed.store(1, std::memory_order_release);
    p.layout = run_.mode.progress_note(cfg_, run_.progress);
    result_.history.push_back(p);
    if (on_progress_) on_progress_(p);
  }

  // The live weights copied for an evaluation when no epoch snapshot holds them
  // (epochs shorter than the parent's poll): one buffer, refreshed where training
  // can change it and the evaluation reads (run_.evaluated_ranges), so that many
  // short epochs of a hashed model do not cost the parent an allocation and a copy
  // of the whole space each. `whole`: every coordinate (a divergence's scan).
  const ParamSet& copy_of_live(bool whole = false) {
    if (!live_copy_)
      live_copy_.emplace(run_.params);
    else
      live_copy_->refresh(run_.params, whole ? std::vector<Ranges>{} : run_.evaluated_ranges);
    return live_copy_->params();
  }

  void checkpoint_if_due() {
    if (cfg_.checkpoint.empty() || cfg_.checkpoint_every <= 0 ||
        seconds_since(last_checkpoint_) < cfg_.checkpoint_every)
      return;
    write_checkpoint_now();
  }

  void write_checkpoint_now() {
    run_.write_checkpoint(cfg_.checkpoint, resumed_seconds_ + seconds_since(t0_) - paused_, restarts_);
    last_checkpoint_ = Clock::now();
    if (model_beside_checkpoints_) run_.write_model(cfg_.save_model, run_.min_epochs());
  }

  TrainResult finish() {
    live_copy_.reset();  // the evaluations' copy of the weights: not held to the end
    double elapsed = seconds_since(t0_) - paused_;
    if (run_.mode.parallel() && !g_signal) {  // the last worker's finish, not when the parent noticed
      std::int64_t last = 0;
      for (auto& p : run_.progress) last = std::max(last, p.finish_ns.load(std::memory_order_relaxed));
      if (last > run_.control->start_ns)
        elapsed = static_cast<double>(last - run_.control->start_ns) * 1e-9;
    }
    if (auto bad = detail::find_non_finite(run_.params))  // the workers are gone
      throw detail::divergence(cfg_, "weight " + *bad, static_cast<double>(run_.min_epochs()),
                               run_.samples());
    TrainResult& r = result_;
    r.signal = g_signal;
    r.restarts = restarts_;
    r.train_seconds = elapsed;
    r.samples = run_.samples();
    r.samples_per_second =
        elapsed > 0 ? static_cast<double>(r.samples - base_samples_) / elapsed : 0;
    const double mean_nnz = static_cast<double>(run_.train.nnz()) /
                            static_cast<double>(run_.train.rows());
    r.nnz_per_second = r.samples_per_second * mean_nnz;
    if (g_signal || r.history.empty()) {  // the weights at the stop
      r.test = run_.evaluate(run_.params);
      r.train_loss = r.history.empty() ? std::nan("") : r.history.back().train_loss;
    } else {
      r.test = r.history.back().test;
      r.train_loss = r.history.back().train_loss;
    }
    for (const auto& p : run_.progress) {
      r.node_syncs += p.node_syncs.load(std::memory_order_relaxed);
      r.node_sync_seconds += static_cast<double>(p.node_sync_ns.load(std::memory_order_relaxed)) * 1e-9;
      if (const auto syncs = p.node_syncs.load(std::memory_order_relaxed))
        r.node_sync_lag_examples =
            static_cast<double>(p.node_sync_others.load(std::memory_order_relaxed)) *
            run_.workers / static_cast<double>(syncs);
    }
    run_.mode.collect_workers(cfg_, run_.progress, r);
    if (cfg_.mode == Mode::hogwild) {  // --balance
      const auto why = detail::no_steal(cfg_, run_.workers);
      r.balance = why ? "static" : "steal";
      r.balance_why = why ? *why : "--balance steal";
      for (auto& p : run_.progress) r.stolen_rows += p.stole.load(std::memory_order_relaxed);
    }
    // A private copy's write-backs (a replica's merges, a hot window's flushes): the
    // workers' count, and the interval they ended with, averaged.
    using Counter = std::atomic<std::uint64_t> WorkerProgress::*;
    const auto write_backs = [&](Counter count, Counter every, std::uint64_t& total, double& mean) {
      std::uint64_t sum = 0;
      for (auto& p : run_.progress) {
        total += (p.*count).load(std::memory_order_relaxed);
        sum += (p.*every).load(std::memory_order_relaxed);
      }
      mean = static_cast<double>(sum) / static_cast<double>(run_.progress.size());
    };
    if (cfg_.merge_every || r.layout.chosen == "replicas")
      write_backs(&WorkerProgress::merges, &WorkerProgress::merge_every, r.merges, r.merge_every);
    if (cfg_.hot_k || r.layout.chosen == "hot")
      write_backs(&WorkerProgress::flushes, &WorkerProgress::flush_every, r.flushes, r.flush_every);
    if (!run_.staleness.empty())
      r.staleness = detail::summarize_staleness(run_.staleness, cfg_.telemetry_every);
    run_.mode.collect(run_.arena, r);
    if (run_.arena.has("conflicts"))
      r.conflicts = detail::summarize_conflicts(run_.arena.block("conflicts").data(),
                                                run_.workers, run_.params);
    r.huge_pages = run_.arena.huge_pages();
    // The workers are gone: exact. Written from the arena, before the result's copy.
    if (!cfg_.checkpoint.empty()) write_checkpoint_now();
    if (!cfg_.save_model.empty() && !model_beside_checkpoints_)
      run_.write_model(cfg_.save_model, run_.min_epochs());
    if (cfg_.result_parameters)
      for (const auto& t : run_.params.tensors()) {
        auto copy = [&](std::vector<float>& dst, const float* src, Dtype type) {
          if (t.space != MemorySpace::device && type == Dtype::f32) {
            dst.assign(src, src + t.size);  // nothing writes now: one plain copy, vectorised
            return;
          }
          dst.resize(t.size);
          read_values(t.space, type, src, 0, t.size, dst.data());
        };
        copy(r.parameters[t.name], t.data, t.dtype);
        if (t.state) copy(r.optimizer_state[t.name], t.state, Dtype::f32);
      }
    if (cfg_.digest_weights) r.weights_sha256 = detail::weights_sha256(run_.params);
    meter_.sample_alone();  // the workers are gone; the result's copy made
    r.peak_rss_bytes = meter_.peak();
    r.memory_estimate = run_.memory;
    return std::move(r);  // the weights' copy moved, not copied again
  }

  detail::Run& run_;
  // What the fork server starts each worker from (its rows copied into memory files):
  // made before the clock of the training starts (t0_, below).
  std::optional<detail::WorkerDescription> described_ =
      run_.cfg.worker_start == WorkerStart::fork_server && run_.mode.parallel()
          ? std::optional<detail::WorkerDescription>(std::in_place, run_)
          : std::nullopt;
  detail::LiveMeter live_;
  detail::TreeMeter meter_;  // the process tree's peak memory
  bool workers_gone_ = false;  // every worker (and server) has ended
  std::optional<ParamSnapshot> live_copy_;
  const TrainConfig& cfg_;
  const ProgressCallback& on_progress_;
  const double resumed_seconds_;
  // --save-model beside each checkpoint, when it goes to a file (a stream gets the
  // final model alone): a run killed later leaves the model of its last checkpoint.
  const bool model_beside_checkpoints_ =
      !cfg_.checkpoint.empty() && !cfg_.save_model.empty() &&
      detail::output_target(cfg_.save_model).kind != detail::OutputTarget::Kind::stream;
  unsigned restarts_;  // workers respawned (a resumed run's earlier ones included)
  const Clock::time_point t0_ = Clock::now();
  Clock::time_point last_checkpoint_ = Clock::now();
  double paused_ = 0;  // serial mode: evaluation time, not counted as training
  unsigned evaluated_ = 0;
  std::uint64_t base_samples_ = 0;  // a resumed run's samples before this process
  double last_time_ = 0;            // the previous evaluation's time and samples
  std::uint64_t last_samples_ = 0;
  Clock::time_point last_stall_check_ = Clock::now();
  TrainResult result_;
};

}  // namespace


TrainResult train(const TrainConfig& config, const Dataset& train_set, const Dataset* test,
                  const ProgressCallback& on_progress, const LiveCallback& on_live,
                  const StartCallback& on_start) {
  config.validate();
  auto model = make_model(config.model, config.model_options);
  return train(config, *model, train_set, test, on_progress, on_live, on_start);
}

namespace {

// train(), once the caller's configuration is known valid; *joined is set once the
// nodes' join begins (it tells the other nodes of its own failures).
TrainResult train_here(const TrainConfig& given, Model& model, const Dataset& train_bytes,
                       const Dataset* test_bytes, const ProgressCallback& on_progress,
                       const LiveCallback& on_live, const StartCallback& on_start, bool* joined);

}  // namespace

TrainResult train(const TrainConfig& given, Model& model, const Dataset& train_bytes,
                  const Dataset* test_bytes, const ProgressCallback& on_progress,
                  const LiveCallback& on_live, const StartCallback& on_start) {
  given.validate();
  if (given.eval_every > 0 && !test_bytes)  // (nothing to evaluate on: it did nothing)
    throw ConfigError(fmt::format("--eval-every {} evaluates the weights on the test set: give "
                                  "--test", given.eval_every));
  // Several nodes: one that fails before the join (its data, a refused resume, an
  // arena that does not fit) tells the nodes waiting to join it, which stop at once.
  bool joined = false;
  const auto called = std::chrono::steady_clock::now();
  try {
    TrainResult r = train_here(given, model, train_bytes, test_bytes, on_progress, on_live,
                               on_start, &joined);
    r.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
    return r;
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    if (!joined) tell_nodes_failed(given, e.what());
    throw;
  }
}

namespace {

TrainResult train_here(const TrainConfig& given, Model& model, const Dataset& train_bytes,
                       const Dataset* test_bytes, const ProgressCallback& on_progress,
                       const LiveCallback& on_live, const StartCallback& on_start, bool* joined) {
  TrainConfig cfg = given;  // with --device-warps resolved
  // Byte rows (dense_u8) go only to a model that reads them; the others get the
  // sets as floats, one shared copy each. The test set follows the training set's
  // storage (stored_like): a sparse test set beside dense training rows (a libsvm
  // test file loaded sparse, or one whose highest index is lower) becomes dense rows
  // of the training width, whose weights are the only trained ones.
  const bool bytes = model.reads_byte_rows();
  const Dataset train_set = bytes ? train_bytes : train_bytes.widened();
  std::optional<Dataset> test_rows;
  if (test_bytes) {
    const Dataset aligned = stored_like(*test_bytes, train_bytes);
    test_rows = bytes ? aligned : aligned.widened();
  }
  const Dataset* test = test_rows ? &*test_rows : nullptr;
  // The caller's sets stay in memory beside copies of them (the memory estimate).
  std::uint64_t other_rows = 0;
  if (train_set.labels().data() != train_bytes.labels().data()) other_rows += train_bytes.bytes();
  if (test && test->labels().data() != test_bytes->labels().data()) other_rows += test_bytes->bytes();
  if (train_set.rows() == 0) throw ConfigError(train_set.source() + " has no rows");
  // --layout replicas and hot: --merge-every auto, and --hot-k from the degree table.
  if (cfg.mode == Mode::hogwild) detail::resolve_layout(cfg, train_set, model);
  if (is_parallel(cfg.mode) && cfg.workers > train_set.rows())
    throw ConfigError(fmt::format("--workers {} is more than the {} training rows", cfg.workers,
                                  train_set.rows()));
  if (cfg.worker_start == WorkerStart::fork_server && is_parallel(cfg.mode)) {
    if (!detail::ForkServer::get())
      throw ConfigError("--worker-start fork-server: no fork server runs in this process (a "
                        "program calls hogwild::start_fork_server() first thing in main)");
    if (model.name() != cfg.model)
      throw ConfigError(fmt::format(
          "--worker-start fork-server makes each worker's model by name, and the model object "
          "given is a '{}' while the configuration names '{}' (register the model with "
          "register_model and name it in TrainConfig::model)", model.name(), cfg.model));
  }
  if (detail::mode_def(cfg.mode).threaded() && model.name() != cfg.model)
    throw ConfigError(fmt::format(
        "--mode {} makes a model for each thread by name, and the model object given is a "
        "'{}' while the configuration names '{}' (register the model with register_model and "
        "name it in TrainConfig::model)", to_string(cfg.mode), model.name(), cfg.model));
  if (cfg.device == Device::cuda) {
    if (cfg.worker_start != WorkerStart::fork_server)
      throw ConfigError("--device cuda starts its workers from the fork server (CUDA does not "
                        "survive fork): train with WorkerStart::fork_server after calling "
                        "hogwild::start_fork_server() first thing in main");
    detail::check_device_run(cfg, model);
    const CudaStatus gpu = detail::device_backend().status();
    if (!gpu.ok) throw ConfigError("no CUDA device: " + gpu.message);
    if (detail::device_access(cfg.mode) == DeviceAccess::gradient)
      detail::check_nccl_ranks(cfg.workers, gpu.devices);
    cfg.device_warps =
        device_warps_for(cfg, train_set,
                         cfg.model_options.bias &&
                             detail::device_kernel_def(model.name()).bias_in_every_example);
  }
  std::optional<Checkpoint> resume;
  if (!cfg.resume.empty()) {
    resume = read_checkpoint(cfg.resume);
    check_resumable(*resume, cfg, train_set, cfg.resume);
  }
  g_requested = 0;  // (on_start may ask: before the run's stop flag is set up)
  detail::Run run(cfg, model, train_set, test, std::nullopt, -1, other_rows);
  if (on_start) on_start(run.memory);
  const unsigned restarts = resume ? run.restore(*resume, cfg.resume) : 0;
  // The workers of a synchronous mode step together: from a checkpoint taken while
  // they ran, all start where the one furthest behind was.
  if (resume && run.mode.synchronous()) run.align_workers();
  run.capture_start();
  g_signal = 0;
  const RunStop run_stop(&run.control->stop);  // (outlives the handlers: made first)
  std::optional<SignalScope> signals;
  if (cfg.handle_signals) signals.emplace();
  if (g_requested) request_stop(g_requested);  // asked for from on_start
  // Several nodes meet before any worker starts: a late one joins, one that differs
  // is refused at once, and the wait is not training time.
  *joined = true;
  if (cfg.nodes > 1 && !run.join_nodes()) throw Interrupted(g_signal ? g_signal : SIGINT);
  TrainResult result =
      Supervisor(run, on_progress, on_live, resume ? resume->train_seconds : 0, restarts).go();
  result.join_seconds = run.join_seconds;
  result.iface = run.control->iface;
  result.device_warps = cfg.device == Device::cuda ? cfg.device_warps : 0;
  return result;
}

}  // namespace

void request_stop(int signal) noexcept {
  if (g_signal) return;
  if (!g_stop) {  // before the run's stop flag exists (its on_start): kept for it
    if (!g_requested) g_requested = signal;
    return;
  }
  on_stop_signal(signal);  // (sets the flag, and says so)
}

}  // namespace hogwild
