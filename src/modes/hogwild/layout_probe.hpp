// --layout auto, hogwild's default: how the workers write the shared weights is
// measured, not assumed (docs/PERFORMANCE.md, "Which layout").
//
// Where every example writes a few hot coordinates (the bias, the frequent words),
// their cache lines move between the cores at every update, and on some machines
// two plain Hogwild! workers run no faster than one; a private replica merged every
// few thousand examples (replica.hpp) then runs near two independent runs. Where
// the rows share little (ratings) or a merge costs much (SpamAssassin: a merge visits
// 61k features in 57k runs), plain is as fast or faster, and a replica only adds
// staleness. No one layout wins on every problem and machine, so each run probes:
//
//   From the first boundary of a kWindowNs window of the steady clock (one clock for
//   every process of the machine, so the workers change phase together), each worker
//   alternates whole windows (window number modulo 2, or 3 with hot coordinates;
//   modulo the phases left once some are ruled out, below): 0 straight to the
//   shared weights, 1 on its replica, 2 on its hot window; the
//   replica reloaded from the shared weights as the window begins and merged
//   when due (--merge-every auto's rule, from its usual start of 256, adapted in
//   the warm windows: a replica starting at the cap of 4096 trained the run's first
//   windows up to a whole epoch's share of a small set stale, and a short run's last
//   epoch then ended above its first at test loss in 2 of 40 runs of the trainer
//   test, 0 of 40 from 256) and as it ends, all inside the window's time.
//   Its first warm_windows windows are not measured, and its steps before the first
//   window and the run's first warm_windows windows (from the first worker's start:
//   run_warm_end) are on a private copy for every worker, the hot window where
//   there is one, else the replica (on the shared weights they would cost what
//   plain loses where cores contend, for no figure): a worker's first windows ran
//   at 2-8x its later cost an example (its caches and the rows' pages cold; RCV1-like
//   on the 2-core AMD EPYC, 6 runs), and whichever phase came first then looked
//   dear: the pooled figures put replicas from 0.54x to 1.23x plain's cost in runs
//   where whole runs had replicas faster every time. After kPairs measured windows
//   of each (one of each where the call is clear: kClearCall; or kMaxWindows
//   windows, whatever it measured), it publishes its figures
//   (each phase's median ns an example over its windows, in the worker's CPU time
//   (cpu_now): a window the VM took the core from for a while is one window, not a
//   third of the figure) in its
//   progress record and
//   trains on the layout its own figures choose until every worker has published
//   (looked for at
//   every read of the clock, or kWaitWindows more windows passed). The first worker
//   to decide pools the published figures,
//   applies the rule (choose_layout) and records the run's decision with the
//   figures in record 0 (a compare-and-swap: no two workers decide apart); every
//   other worker takes that decision at its next read of the clock (probing: at its
//   next window).
//   A window that spans more than one window of the clock (a long batch) is not
//   measured; an epoch's end in a window is (short epochs pay it in both phases;
//   the replica's reload as an epoch begins, only in a replica window).
//
// The probe's examples count as training: nothing is thrown away, and a crash
// mid-probe retrains what it would have without one (its replica windows publish
// the place at each merge, as a replica does). A worker restarted after the
// decision takes the decision without probing.
//
// Hot coordinates (--layout hot, hot_window.hpp) are the third choice where the
// parent can afford their window (probe_offers_hot): the copy of the rows with the
// hot features renumbered into it, made before the workers fork, at most
// kHotCopyMost. The probe's windows then go shared, replica, hot in turn (a hot
// window flushed as it begins and ends, as a replica window merges), and the rule
// weighs three figures. A replica is dear where its merges visit many scattered
// features (SpamAssassin: one worker on a replica at 0.63x one plain, three merges
// an epoch over 61k features), and hot coordinates then cure the contention for
// less (0.83 of the ceiling there against replicas' 0.57). Past kMaxWorkers workers
// the probe does not run and the
// layout is plain: replicas merged every few thousand examples diverged at 8 and 16
// workers at lr 0.5 on RCV1-like (each merge adds every worker's change to the hot
// coordinates at once), which a timing probe cannot see.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hogwild/trainer.hpp"
#include "modes/hogwild/hot_window.hpp"
#include "modes/hogwild/layout_plan.hpp"
#include "modes/hogwild/layout_rule.hpp"
#include "modes/hogwild/replica.hpp"
#include "trainer/epoch_part.hpp"
#include "trainer/progress.hpp"

namespace hogwild::detail {

struct ModeWorker;

// The worker's part of its step loop while it probes, and after: the replica or
// the hot window it keeps, or nothing (plain).
class LayoutProbe final : public EpochPart {
 public:
  // `all`: every worker's progress record on this node (this one's is all[rank]).
  // `hot`: the third choice's window (null: two choices).
  // window_ns: the windows' length (probe_window_ns; the same in every worker).
  LayoutProbe(std::unique_ptr<Replica> replica, std::span<WorkerProgress> all, unsigned rank,
              std::unique_ptr<HotWindow> hot = nullptr, std::uint64_t window_ns = kWindowNs);

  const ParamSet* trained() const noexcept override {
    return on_ == kReplica ? &replica_->params() : on_ == kHot ? &hot_->params() : nullptr;
  }
  const Dataset* rows() const noexcept override { return on_ == kHot ? hot_->rows() : nullptr; }
  bool writes_later() const noexcept override { return on_ != kShared; }
  bool settled() const noexcept override { return phase_ == Phase::decided; }
  bool idle() const noexcept override { return phase_ == Phase::decided && on_ == kShared; }
  // On a private copy, reloads it as its epoch begins (PrivateCopyPart).
  void begin_epoch(std::span<const std::uint32_t>, std::size_t) override { write_back(); }
  bool after_batch(const Batch& b, float lr, const EpochPlace& place) override;
  void end_epoch(float lr, const EpochPlace& place, bool whole) override;
  void report(WorkerProgress& p) const override {
    replica_->report(p);
    if (hot_) hot_->report(p);
  }

  // For tests: the phase, what this worker trains now (0 the shared weights, 1 its
  // replica, 2 its hot window), and what it measured.
  bool decided() const noexcept { return phase_ == Phase::decided; }
  int on() const noexcept { return on_; }
  ProbeFigures own() const noexcept;
  // For tests: the clock the probe reads (ns), in place of the steady clock, and the
  // worker's CPU time in place of its thread's (null: the clock, as if the worker
  // ran through every window).
  void use_clock(std::uint64_t (*clock)(), std::uint64_t (*cpu_clock)() = nullptr) noexcept {
    clock_ = clock;
    cpu_clock_ = cpu_clock;
    window_ = now() / window_ns_;
  }

 private:
  enum class Phase : std::uint8_t { starting, probing, waiting, decided } phase_ = Phase::starting;
  // What the steps train, and the index of a phase's figures.
  static constexpr int kShared = 0, kReplica = 1, kHot = 2;
  std::uint64_t (*clock_)() = nullptr;  // null: the steady clock (first: now() reads it)
  std::uint64_t (*cpu_clock_)() = nullptr;  // with a test's clock: the worker's CPU time
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<HotWindow> hot_;
  std::span<WorkerProgress> all_;
  unsigned rank_;
  bool posted_ = false;             // it has offered the run its phases left (run_live)
  int on_ = kShared;
  std::uint64_t window_ns_;         // the windows' length
  std::uint64_t window_ = 0;        // the steady clock's window now (now / window_ns_)
  std::uint64_t cpu_started_ns_ = 0;  // the worker's CPU time as the window began (cpu_now)
  std::uint64_t examples_ = 0;      // examples in it so far
  std::uint64_t batches_ = 0;
  std::uint64_t deadline_ = 0;      // waiting: the window after which it decides anyway
  std::uint64_t last_window_ = 0;   // probing: the window after which it stops measuring
  unsigned warm_ = 0;               // windows ended so far, up to warm_windows
  std::uint64_t warm_end_ = 0;      // the run's first window past its warm ones
  double ns_[3][kMaxWindows] = {};  // ns an example in each measured window of each
  unsigned windows_[3] = {0, 0, 0};  // phase (kShared, kReplica, kHot), and how many

  std::uint64_t now() const noexcept;
  // The worker's CPU time (thread_cpu_ns), what a window's figure is measured in.
  std::uint64_t cpu_now() const noexcept;
  // `written`: the copy the steps trained so far was written back (end_window).
  void begin_window(std::uint64_t now, const EpochPlace& place, bool written);
  // Where warm window `window` goes: the replica, but every warm window after the
  // first on the hot window where there is one. Each copy then adapts its
  // write-back interval before it is measured (from 256 examples: a replica of
  // SpamAssassin's 2^20 features, whose merge visits 61k of them, measured from
  // its first merges looked dearer than it is), and the hot window, the cheaper
  // where there is one (SpamAssassin: 0.46x plain's cost an example, a replica
  // 0.58x), is the one the others' contention meets as measuring begins. (With
  // four warm windows of 5 ms, three on the replica cost auto 0.83x forced hot on
  // SpamAssassin, 20 interleaved pairs.)
  int warm(std::uint64_t window) const noexcept {
    return hot_ && window + warm_windows(window_ns_) > warm_end_ ? kHot : kReplica;
  }
  // The probe's phases: 2, or 3 with the hot window; and their bits (contenders()).
  unsigned kinds() const noexcept { return hot_ ? 3 : 2; }
  unsigned all_kinds() const noexcept { return hot_ ? 0b111 : 0b011; }
  // The phases still measured in window `window` (bits), by the run's record.
  unsigned live(std::uint64_t window) const noexcept;
  // The phase the steps train once the run decided `chosen` (1 + WeightLayout).
  int kind_of(std::uint32_t chosen) const noexcept;
  // The phase of measured window `window`: the live ones in turn.
  int phase_of(std::uint64_t window) const noexcept;
  void end_window(std::uint64_t window, const EpochPlace& place);
  // The private copy's changes to the shared weights, and the copy reloaded (a
  // replica's merge, a hot window's flush); nothing on the shared weights. With a
  // place: bracketed, and the place published.
  void write_back() noexcept;
  void write_back(const EpochPlace& place);
  // Publishes this worker's figures and waits for the others' at most `wait` windows,
  // training meanwhile on the layout its own figures choose (the copy of the window
  // just ended written back).
  void publish_figures(std::uint64_t window, unsigned wait, const EpochPlace& place);
  void decide(const EpochPlace& place);
  void adopt(std::uint32_t chosen, const EpochPlace& place);
};

// Whether worker `w` of hogwild probes, and if so its part (else null).
std::unique_ptr<EpochPart> make_layout_probe(const ModeWorker& w);

// The figures of the workers that published theirs (`all`: every worker's record),
// averaged over those that measured every phase (over those that measured each,
// where none did).
ProbeFigures pooled_figures(std::span<const WorkerProgress> all);
// The run's decision in record 0 (1 + WeightLayout), once made; else 0.
std::uint32_t run_decision(std::span<const WorkerProgress> all) noexcept;
// Decides for the run from `f`, unless another worker has: the decision either way.
std::uint32_t settle(std::span<WorkerProgress> all, const ProbeFigures& f);
// The run's layout for its result (empty for a mode other than hogwild), from its
// records once the workers are gone.
TrainResult::LayoutChoice layout_choice(const TrainConfig& c, std::span<const WorkerProgress> all);
// Once every worker of a probing run has decided: a line saying what and why, for
// the progress the CLI prints; else empty.
std::string layout_line(const TrainConfig& c, std::span<const WorkerProgress> all);

}  // namespace hogwild::detail
