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
//   Its first kWarmWindows windows are not measured, and its steps before the first
//   window and the run's first kWarmWindows windows (from the first worker's start:
//   run_warm_end) are on a private copy for every worker, the hot window where
//   there is one, else the replica (on the shared weights they would cost what
//   plain loses where cores contend, for no figure): a worker's first windows ran
//   at 2-8x its later cost an example (its caches and the rows' pages cold; RCV1-like
//   on the 2-core AMD EPYC, 6 runs), and whichever phase came first then looked
//   dear: the pooled figures put replicas from 0.54x to 1.23x plain's cost in runs
//   where whole runs had replicas faster every time. After kPairs measured windows
//   of each (one of each where the call is clear: kClearCall; or kMaxWindows
//   windows, whatever it measured), it publishes its figures
//   (each phase's median ns an example over its windows: a window the VM took the
//   core from for a while is one window, not a third of the figure) in its
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

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hogwild/trainer.hpp"
#include "modes/hogwild/hot_window.hpp"
#include "modes/hogwild/replica.hpp"
#include "trainer/epoch_part.hpp"
#include "trainer/progress.hpp"

namespace hogwild::detail {

struct ModeWorker;

// What the probe measured, pooled over the workers that published figures.
struct ProbeFigures {
  double shared_ns = 0;   // an example, straight to the shared weights (median window)
  double replica_ns = 0;  // an example on a replica, its reloads and merges included
  unsigned windows = 0;   // windows measured in all (each worker's, every phase)
  double hot_ns = 0;      // an example with hot coordinates, flushes included (0: not a choice)
  std::uint64_t window_ns = 10'000'000;  // the windows' length (probe_window_ns)
};

struct LayoutDecision {
  WeightLayout layout = WeightLayout::plain;
  std::string why;  // the figures and the rule, for the summary
};

// Replicas win when an example on them costs at most this much of one on the shared
// weights: in a close call, replicas. What plain costs where cores contend for the
// hot lines moves with the machine's phase, which a probe of 90 ms cannot foresee
// (plain spread from 0.49 to 1.00 of the ceiling over 5 repetitions of one bench on
// RCV1-like, replicas from 0.83 to 1.02), while a replica's merges cost about 5 % by
// --merge-every auto's rule whatever the phase. Where the probe measured the two
// within 10 %, whole runs had replicas 1.09x plain (RCV1-like) and 0.97x-1.01x
// (Fashion-MNIST softmax), each inside plain's accuracy band; where merges cost more
// than they save (SpamAssassin, the ratings: 1.44x-1.92x) the probe is nowhere near
// the bar. (Before the probe left out its warm windows a bar of 0.9x absorbed their
// noise, and chose plain in 6 of 12 RCV1-like runs that replicas then beat by 12 %,
// median.)
inline constexpr double kReplicaWins = 1.1;
// Hot coordinates are weighed as replicas are (their private copy is smaller and
// flushed more often, so they are the less stale of the two): a private layout wins
// at kReplicaWins of plain's cost or less, and of the two the cheaper, hot on a tie.
// (The figures' weights: plain's shared_ns, the others' ns / kReplicaWins.)
// 10 ms windows, 2 warm and 3 of each phase: about 90 ms from the start (50 ms on a
// clear call, below), a small part of most runs worth a second worker (the layouts
// bench's RCV1-like runs take 0.5 s; its SpamAssassin runs, 0.1-0.2 s, are the
// exception), and 3 windows of each phase from each of two workers, some 10,000
// examples each.
inline constexpr std::uint64_t kWindowNs = 10'000'000;
// Where each worker's share of the run is under kShortRun examples (under about
// half a second), the windows are kShortWindowNs: the probe then takes 25-45 ms, not
// 50-90 ms, of a run where it would cost the most. A shorter window is a noisier
// figure, so longer runs keep kWindowNs. Two workers, interleaved pairs on the 2-core
// Xeon, 5 ms windows against 10 ms: on SpamAssassin (60 epochs of 4,810 rows, 0.2 s;
// 144k examples a worker) auto ran 1.04x (16 pairs), 0.986x forced hot against
// 0.907x; on RCV1-like (3 epochs of 500k rows, 750k a worker) 0.925x (8 pairs).
inline constexpr std::uint64_t kShortWindowNs = 5'000'000;
inline constexpr std::uint64_t kShortRun = 500'000;
// The probe's window for a run of `epochs` over `rows` among `workers`.
constexpr std::uint64_t probe_window_ns(std::uint64_t epochs, std::uint64_t rows, unsigned workers) {
  return epochs * rows < kShortRun * std::max(workers, 1u) ? kShortWindowNs : kWindowNs;
}
inline constexpr unsigned kWarmWindows = 2;  // windows first, on a private copy, not measured
inline constexpr unsigned kPairs = 3;        // windows of each phase a worker measures
inline constexpr unsigned kWaitWindows = 4;  // then how long it waits for the others
inline constexpr unsigned kMaxWindows = 8 * kPairs;  // the probe's longest, measured or not
// What the probe takes at least when it measures `pairs` windows of each of its
// `kinds` phases, for the lines that say so: the partial window it starts in, the
// warm ones, and the measured ones.
constexpr std::uint64_t probe_ms(unsigned pairs, unsigned kinds = 2, std::uint64_t window_ns = kWindowNs) {
  return (kWarmWindows + kinds * pairs + 1) * window_ns / 1'000'000;
}
inline constexpr std::uint64_t kProbeMs = probe_ms(kPairs);
inline constexpr unsigned kMaxWorkers = 4;   // past it: plain, no probe (see above)
// A clear call ends the probe after its first measured window of each phase:
// replicas at kReplicaWins / kClearCall of plain's cost or less, or plain at
// kReplicaWins * kClearCall or more. The probe's windows on the shared weights cost
// what plain loses, so the probe costs most where the call is clearest: on
// RCV1-like, with the cores contending (plain at 0.38 of the ceiling), the probe
// measured replicas at 0.35x-0.47x and auto ran at 0.946x forced replicas (30
// interleaved pairs); with the early end, the warm windows on the replica and the
// wait looked at every clock read, 0.987x (30 more). A window the VM took the core from
// for a while can make a close call look clear (either layout is then about as
// fast), but a clear one the other way only off by 1.5x^2 in both workers' figures,
// pooled. Only the first pair decides early: later, a phase's median of two windows
// is their mean, and one slow window would move it.
// With three phases: the cheapest by the weights above at kClearCall of every
// other's or less. Where two of three stay within it, the third is ruled out
// after the first window of each and the probe measures only those two after:
// on SpamAssassin plain (2.4x hot's weight) then costs one window of 10 ms, not
// three, while hot and replicas take their kPairs each where their first windows
// were within 1.5x. The first worker to have one window of each rules them out
// for the run, from the next window of the clock (record 0's run_live), so every
// worker's windows follow one cycle; the pooled figures still hold every worker's
// first window of a phase ruled out, which the rule weighs with the rest.
inline constexpr double kClearCall = 1.5;
inline constexpr std::uint64_t kClearProbeMs = probe_ms(1);
bool clear_call(const ProbeFigures& f) noexcept;
// The phases still in the running on these figures (bit 0 shared, 1 replica, 2
// hot): the cheapest and those under kClearCall times its weight; every phase
// where the shared or replica phase was not measured, and hot where it was not.
unsigned contenders(const ProbeFigures& f) noexcept;

// The probe's rule: a function of its figures alone. Plain unless the shared and
// the replica phases were measured; then the cheapest by the weights above
// (kReplicaWins), hot among them where it was measured.
LayoutDecision choose_layout(const ProbeFigures& f);

// What --layout resolves to before the workers start: why a run does not probe
// (a layout given or implied by --merge-every or --hot-k, one worker, more than
// kMaxWorkers, AdaGrad, another mode, several nodes, the GPU, the instruments, a
// model and rows that are not replicas_sound: TrainConfig::replicas_unsound), or
// nullopt when it probes. `workers`: this node's.
std::optional<std::string> no_probe(const TrainConfig& c, unsigned workers);

// Whether --layout auto may choose replicas for `model` on `train`: a model that is
// Model::feature_indexed on sparse rows, whose replica merges the bias as the
// workers' mean (bias_mean, writer_parts.hpp, asks this), the case whose accuracy was measured
// with replicas inside plain's seed band. Every other model's replica adds each
// worker's whole change to the coordinates every example moves (a dense row's
// weights, a softmax's or an MLP's biases), the overshoot the linear bias had.
// Measured on Fashion-MNIST softmax (2 workers, 3 epochs, 2 runs of 5 seeds):
// replicas ended near accuracy 0.79 in 3 of 10 runs, plain in 1 of 10 — not
// settled, so auto keeps plain there (at 0.97-1.02 of the ceiling, as fast as
// replicas). --layout replicas still forces them on any model.
bool replicas_sound(const Model& model, const Dataset& train);
// Sets c.replicas_unsound from it (under --layout auto; false otherwise): what
// resolve_layout does for auto, and the CLI's header line before the run.
void mark_replicas_unsound(TrainConfig& c, const Model& model, const Dataset& train);

// Whether a probing run offers hot coordinates too: it probes (no_probe), its model
// and rows can have them (replicas_sound, which no_probe asks), its arena is on
// /dev/shm (a --shm-dir on hugetlbfs cannot take the window's small private pages:
// --hot-k there is a clear error, which auto must not make), and the copy of the
// rows' indices they need is at most kHotCopyMost. That copy is shared by the
// workers, but it is the one thing a hot window adds to the rows' memory (4 bytes a
// non-zero): 10 MiB on SpamAssassin, 144 MiB on RCV1-like, which would take that
// run past its memory target (data + model + 30 MiB a worker) where replicas
// already reach 0.9 of the ceiling. Hot's K: hot_features(train).
inline constexpr std::uint64_t kHotCopyMost = 32 << 20;
bool probe_offers_hot(const TrainConfig& c, unsigned workers, const Dataset& train);
// --layout hot's K, and the probe's: the features in at least 1/kHotShare of
// `train`'s rows (at least 1, at most kHotMost).
std::size_t hot_features(const Dataset& train);
// The probe's hot features, where it offers them (else none): the hot_features(train)
// most frequent among the first `features` (the model's tensor 0), from one pass
// over the rows.
std::vector<std::uint32_t> probe_hot_features(const TrainConfig& c, unsigned workers,
                                              const Dataset& train, std::size_t features);

// The line that says before the run what will write the shared weights: the layout
// and why, or what the probe will weigh.
std::string layout_plan(const TrainConfig& c, unsigned workers, const Dataset& train);

// The layout of a run that does not probe: what --merge-every or --hot-k set, else
// the --layout given, else (auto without a probe) plain.
const char* fixed_layout(const TrainConfig& c) noexcept;

// --layout replicas and hot, made concrete when the run starts: --merge-every auto,
// and --hot-k as the features in at least 1/kHotShare of `train`'s rows (at least 1,
// at most kHotMost), unless the option was given; auto: replicas_unsound from
// replicas_sound. ConfigError for hot with a model that is not
// Model::feature_indexed, or on rows that are not sparse. (A worker started from a
// description, whose options carry what the parent resolved, marks
// replicas_unsound again itself.)
inline constexpr std::size_t kHotShare = 64, kHotMost = 4096;
void resolve_layout(TrainConfig& c, const Dataset& train, const Model& model);

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
  // For tests: the clock the probe reads (ns), in place of the steady clock.
  void use_clock(std::uint64_t (*clock)()) noexcept {
    clock_ = clock;
    window_ = now() / window_ns_;
  }

 private:
  enum class Phase : std::uint8_t { starting, probing, waiting, decided } phase_ = Phase::starting;
  // What the steps train, and the index of a phase's figures.
  static constexpr int kShared = 0, kReplica = 1, kHot = 2;
  std::uint64_t (*clock_)() = nullptr;  // null: the steady clock (first: now() reads it)
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<HotWindow> hot_;
  std::span<WorkerProgress> all_;
  unsigned rank_;
  bool posted_ = false;             // it has offered the run its phases left (run_live)
  int on_ = kShared;
  std::uint64_t window_ns_;         // the windows' length
  std::uint64_t window_ = 0;        // the steady clock's window now (now / window_ns_)
  std::uint64_t started_ns_ = 0;    // when the phase's window began to be measured
  std::uint64_t examples_ = 0;      // examples in it so far
  std::uint64_t batches_ = 0;
  std::uint64_t deadline_ = 0;      // waiting: the window after which it decides anyway
  std::uint64_t last_window_ = 0;   // probing: the window after which it stops measuring
  unsigned warm_ = 0;               // windows ended so far, up to kWarmWindows
  std::uint64_t warm_end_ = 0;      // the run's first window past its warm ones
  double ns_[3][kMaxWindows] = {};  // ns an example in each measured window of each
  unsigned windows_[3] = {0, 0, 0};  // phase (kShared, kReplica, kHot), and how many

  std::uint64_t now() const noexcept;
  // `written`: the copy the steps trained so far was written back (end_window).
  void begin_window(std::uint64_t now, const EpochPlace& place, bool written);
  // Where warm window `window` goes: the replica, but the last warm window on the
  // hot window where there is one. Each copy then adapts its write-back interval
  // before it is measured (from 256 examples: a replica of SpamAssassin's 2^20
  // features, whose merge visits 61k of them, measured from its first merges
  // looked dearer than it is), and the hot window, the cheaper where there is
  // one (SpamAssassin: 0.46x plain's cost an example, a replica 0.58x), is the
  // one the others' contention meets as measuring begins.
  int warm(std::uint64_t window) const noexcept {
    return hot_ && window + 1 >= warm_end_ ? kHot : kReplica;
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
// averaged.
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
