#include "modes/hogwild/layout_probe.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "modes/hogwild/hot_window.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
constexpr std::uint32_t kClaimed = 0xffff;  // run_layout while its claimant writes the figures
}  // namespace

LayoutProbe::LayoutProbe(std::unique_ptr<Replica> replica, std::span<WorkerProgress> all,
                         unsigned rank, std::unique_ptr<HotWindow> hot, std::uint64_t window_ns)
    : replica_(std::move(replica)),
      hot_(std::move(hot)),
      all_(all),
      rank_(rank),
      window_ns_(window_ns),
      window_(now() / window_ns_) {
  all_[0].run_window_ns.store(window_ns_, std::memory_order_relaxed);  // (for the summary)
  // A worker restarted after the decision takes it (its copy is fresh from the
  // shared weights).
  if (const std::uint32_t chosen = run_decision(all_)) {
    phase_ = Phase::decided;
    on_ = kind_of(chosen);
    all_[rank_].layout.store(chosen, std::memory_order_release);
    return;
  }
  on_ = kReplica;  // until the first window of the clock begins (its copy is fresh)
}

int LayoutProbe::kind_of(std::uint32_t chosen) const noexcept {
  if (chosen == layout_code(WeightLayout::replicas)) return kReplica;
  return chosen == layout_code(WeightLayout::hot) && hot_ ? kHot : kShared;
}

std::uint64_t LayoutProbe::now() const noexcept { return clock_ ? clock_() : steady_ns(); }

// A window's figure is the worker's CPU time an example, not the clock's: where
// another process had the core a while (the parent evaluating an epoch's end, the
// run's other jobs) or the hypervisor took it (paravirtual steal accounting leaves
// it out of a thread's time), the clock's figure is the wait's as much as the
// layout's. On SpamAssassin the parent's evaluations took 10-50 % of one worker's
// core in a fifth of the probe's 5 ms windows (worker 1 mostly: 20 of 110 below
// 0.9 of the clock over 10 runs), and one such window of a private phase made
// plain look the cheaper (kClearCall). A stall on a contended line is the worker's
// time, as on the clock.
std::uint64_t LayoutProbe::cpu_now() const noexcept {
  return clock_ ? (cpu_clock_ ? cpu_clock_() : clock_()) : thread_cpu_ns();
}

ProbeFigures LayoutProbe::own() const noexcept {
  const auto median = [this](int kind) {
    const unsigned n = windows_[kind];
    if (n == 0) return 0.0;
    double v[kMaxWindows];
    std::copy(ns_[kind], ns_[kind] + n, v);
    std::sort(v, v + n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  return {median(kShared), median(kReplica), windows_[0] + windows_[1] + windows_[2],
          median(kHot)};
}

void LayoutProbe::write_back() noexcept {
  if (on_ == kReplica) replica_->merge();
  if (on_ == kHot) hot_->flush();
}

void LayoutProbe::write_back(const EpochPlace& place) {
  place.open();
  write_back();
  place.publish();
}

void LayoutProbe::begin_window(std::uint64_t at, const EpochPlace& place, bool written) {
  window_ = at / window_ns_;
  if (!written && on_ != kShared) write_back(place);  // the copy trained before the first window
  // The run's warm windows run on a private copy (warm): on the shared weights
  // they would cost what plain loses where cores contend, and no figure comes of
  // them. They are the run's, not each worker's, so that a worker that begins a
  // window later is in the others' phase in every window after them (its own first
  // windows, warm or not, are still not measured).
  const int previous = on_;
  on_ = window_ < warm_end_ ? warm(window_) : phase_of(window_);
  cpu_started_ns_ = cpu_now();
  examples_ = 0;
  // Nothing of its own yet: the copy reloads (in its time), unless it is the one
  // just written back, which reloaded it.
  if (on_ != kShared && on_ != previous) write_back(place);
}

unsigned LayoutProbe::live(std::uint64_t window) const noexcept {
  const std::uint64_t run = all_[0].run_live.load(std::memory_order_acquire);
  const auto left = static_cast<unsigned>(run & 7) & all_kinds();
  return run != 0 && window >= (run >> 3) && left != 0 ? left : all_kinds();
}

int LayoutProbe::phase_of(std::uint64_t window) const noexcept {
  const unsigned left = live(window);
  auto k = static_cast<unsigned>(window % static_cast<unsigned>(std::popcount(left)));
  for (int kind = 0; kind < 3; ++kind)
    if ((left >> kind & 1) && k-- == 0) return kind;
  return kShared;
}

void LayoutProbe::end_window(std::uint64_t window, const EpochPlace& place) {
  const int kind = on_;
  if (on_ != kShared) write_back(place);  // the window's changes, in its time
  // Not measured: the first warm_windows, a window with no batch done, or one that
  // spans more than one window of the clock (a long batch: both phases' time in it).
  if (warm_ < warm_windows(window_ns_)) {
    ++warm_;
    return;
  }
  if (examples_ == 0 || window != window_ + 1 || windows_[kind] == kMaxWindows) return;
  ns_[kind][windows_[kind]++] =
      static_cast<double>(cpu_now() - cpu_started_ns_) / static_cast<double>(examples_);
}

void LayoutProbe::publish_figures(std::uint64_t window, unsigned wait, const EpochPlace& place) {
  const ProbeFigures f = own();
  WorkerProgress& p = all_[rank_];
  p.probe_shared_ns.store(f.shared_ns, std::memory_order_relaxed);
  p.probe_replica_ns.store(f.replica_ns, std::memory_order_relaxed);
  p.probe_hot_ns.store(f.hot_ns, std::memory_order_relaxed);
  p.probe_windows.store(f.windows, std::memory_order_relaxed);
  p.probed.store(1, std::memory_order_release);
  phase_ = Phase::waiting;
  window_ = window;
  deadline_ = window + wait;
  // The wait is on what this worker's figures choose, most often the run's choice:
  // on the shared weights it cost what plain loses, up to kinds (kPairs - 1) +
  // kWaitWindows windows where a late worker has yet to measure (the clear call).
  const int to = kind_of(layout_code(choose_layout(f).layout));
  if (to != on_) {
    on_ = to;
    if (on_ != kShared) write_back(place);  // the copy reloads from the shared weights
  }
}

bool LayoutProbe::after_batch(const Batch& b, float, const EpochPlace& place) {
  if ((on_ == kReplica && replica_->due(b.size)) || (on_ == kHot && hot_->due(b.size)))
    write_back(place);
  if (phase_ == Phase::decided) return true;
  examples_ += b.size;
  // The clock every 8 batches of one example (20 ns a read), every batch of more.
  if (b.size == 1 && (++batches_ & 7) != 0) return true;
  const std::uint64_t at = now();
  const std::uint64_t window = at / window_ns_;
  // Waiting on the shared weights costs what plain loses: the others' figures are
  // looked for at every read of the clock, not at the next window (10 ms of plain
  // more in every run, the workers publishing in the same window).
  if (window == window_ && phase_ != Phase::waiting) return true;
  // Another worker decided for the run: taken at once, whatever this one's phase.
  if (const std::uint32_t chosen = run_decision(all_)) {
    adopt(chosen, place);
    return true;
  }
  switch (phase_) {
    case Phase::starting: {  // the first whole window begins
      phase_ = Phase::probing;
      last_window_ = window + kMaxWindows;
      std::uint64_t warm_end = 0;
      std::atomic<std::uint64_t>& run = all_[0].run_warm_end;
      run.compare_exchange_strong(warm_end, window + warm_windows(window_ns_), std::memory_order_acq_rel);
      warm_end_ = run.load(std::memory_order_acquire);
      begin_window(at, place, /*written=*/false);
      break;
    }
    case Phase::probing: {
      end_window(window, place);
      // After the first window of each phase, those that cannot win are ruled out
      // for the run, from the next window of the clock, by the first worker to get
      // there (once: later, a phase's median of two windows is their mean, and one
      // slow window would move it). Every worker's windows then follow one cycle.
      if (!posted_) {
        bool first = true;
        for (unsigned k = 0; k < kinds(); ++k) first = first && windows_[k] >= 1;
        if (first) {
          posted_ = true;
          std::uint64_t none = 0;
          all_[0].run_live.compare_exchange_strong(none, (window + 1) << 3 | (contenders(own()) & all_kinds()),
                                                   std::memory_order_acq_rel);
        }
      }
      // The run's phases left (in force from the next window at the latest; every
      // phase until they are posted).
      const unsigned left = live(window + 1);
      bool whole = window >= last_window_;
      if (!whole) {
        whole = true;
        for (unsigned k = 0; k < kinds(); ++k)
          whole = whole && (!(left >> k & 1) || windows_[k] >= kPairs);
      }
      // Clear (one phase left for the run): every worker publishes at its next
      // window's end, but one that began late may have measured little yet; the
      // decision waits for its figures as long as its whole probe would take,
      // kinds (kPairs - 1) windows more, so that it pools every worker's figures.
      const bool clear = !whole && std::popcount(left) == 1;
      if (!whole && !clear) {
        begin_window(now(), place, /*written=*/true);
        break;
      }
      // (The window's copy was written back by end_window.)
      publish_figures(window, whole ? kWaitWindows : kinds() * (kPairs - 1) + kWaitWindows, place);
      break;
    }
    case Phase::waiting: {
      window_ = window;
      bool all = true;
      for (const WorkerProgress& p : all_) all = all && p.probed.load(std::memory_order_acquire) != 0;
      if (all || window >= deadline_) decide(place);
      break;
    }
    case Phase::decided:
      break;
  }
  return true;
}

void LayoutProbe::decide(const EpochPlace& place) {
  ProbeFigures f = pooled_figures(all_);
  f.window_ns = window_ns_;
  adopt(settle(all_, f), place);
}

void LayoutProbe::adopt(std::uint32_t chosen, const EpochPlace& place) {
  const int to = kind_of(chosen);
  if (on_ != to) {
    if (on_ != kShared) write_back(place);  // mid-window: its changes reach the weights
    on_ = to;
    if (on_ != kShared) write_back(place);  // the copy reloads from the shared weights
  }
  phase_ = Phase::decided;
  all_[rank_].layout.store(chosen, std::memory_order_release);
}

void LayoutProbe::end_epoch(float, const EpochPlace& place, bool) {
  if (on_ == kShared) return;
  place.open();  // the loop publishes the place after every part's end
  write_back();
}

std::uint32_t run_decision(std::span<const WorkerProgress> all) noexcept {
  const std::uint32_t c = all.empty() ? 0 : all[0].run_layout.load(std::memory_order_acquire);
  return c == kClaimed ? 0 : c;
}

std::uint32_t settle(std::span<WorkerProgress> all, const ProbeFigures& f) {
  WorkerProgress& r = all[0];
  std::uint32_t seen = 0;
  if (r.run_layout.compare_exchange_strong(seen, kClaimed, std::memory_order_acq_rel)) {
    r.run_shared_ns.store(f.shared_ns, std::memory_order_relaxed);
    r.run_replica_ns.store(f.replica_ns, std::memory_order_relaxed);
    r.run_hot_ns.store(f.hot_ns, std::memory_order_relaxed);
    r.run_windows.store(f.windows, std::memory_order_relaxed);
    const std::uint32_t chosen = layout_code(choose_layout(f).layout);
    r.run_layout.store(chosen, std::memory_order_release);
    return chosen;
  }
  // Claimed: its figures and layout follow within nanoseconds, unless the claimant
  // died in between (then plain, here, after 100 ms).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while ((seen = r.run_layout.load(std::memory_order_acquire)) == kClaimed &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
  return seen == kClaimed ? layout_code(WeightLayout::plain) : seen;
}

ProbeFigures pooled_figures(std::span<const WorkerProgress> all) {
  // Each figure averaged over the workers that measured every phase any worker
  // measured; where none did, over the workers that measured it (a worker that
  // published without a window of some phase, because it started late or the
  // probe's window limit came first, adds no zero to its mean). A worker's figures
  // differ from another's by more than the phases do: one that shares its core with
  // the parent, whose evaluations at every epoch's end take its caches, measured
  // 3-14x the other's cost an example in its first windows on SpamAssassin. Where
  // it measured only the private phases (the first worker's call ruled the rest
  // out), their means carried its cost and the shared one did not, and plain won:
  // 6 of 40 default runs chose plain or replicas on such figures, each of which the
  // first worker's own figures alone would have given to hot.
  const auto measured = [](const WorkerProgress& p) {
    return (positive(p.probe_shared_ns.load(std::memory_order_relaxed)) ? 1u : 0u) |
           (positive(p.probe_replica_ns.load(std::memory_order_relaxed)) ? 2u : 0u) |
           (positive(p.probe_hot_ns.load(std::memory_order_relaxed)) ? 4u : 0u);
  };
  unsigned any = 0;
  for (const WorkerProgress& p : all)
    if (p.probed.load(std::memory_order_acquire) != 0) any |= measured(p);
  bool whole = false;  // some worker measured every phase of `any`
  for (const WorkerProgress& p : all)
    whole = whole || (p.probed.load(std::memory_order_acquire) != 0 && measured(p) == any);
  ProbeFigures f;
  unsigned shared = 0, replica = 0, hot = 0;
  const auto add = [](double& sum, unsigned& n, double ns) {
    if (positive(ns)) {
      sum += ns;
      ++n;
    }
  };
  for (const WorkerProgress& p : all) {
    if (p.probed.load(std::memory_order_acquire) == 0) continue;
    f.windows += p.probe_windows.load(std::memory_order_relaxed);
    if (whole && measured(p) != any) continue;
    add(f.shared_ns, shared, p.probe_shared_ns.load(std::memory_order_relaxed));
    add(f.replica_ns, replica, p.probe_replica_ns.load(std::memory_order_relaxed));
    add(f.hot_ns, hot, p.probe_hot_ns.load(std::memory_order_relaxed));
  }
  if (shared) f.shared_ns /= shared;
  if (replica) f.replica_ns /= replica;
  if (hot) f.hot_ns /= hot;
  return f;
}

TrainResult::LayoutChoice layout_choice(const TrainConfig& c, std::span<const WorkerProgress> all) {
  TrainResult::LayoutChoice r;
  if (c.mode != Mode::hogwild) return r;
  if (const auto why = no_probe(c, static_cast<unsigned>(all.size()))) {
    r.chosen = fixed_layout(c);
    r.why = *why;
    return r;
  }
  r.probed = true;
  for (const WorkerProgress& p : all) {
    const std::uint32_t chosen = p.layout.load(std::memory_order_acquire);
    r.workers.push_back(chosen ? to_string(static_cast<WeightLayout>(chosen - 1)) : "none");
  }
  const std::uint32_t decided = run_decision(all);
  // The windows' length, as the workers recorded it (before a worker ran: the usual).
  const std::uint64_t posted = all.empty() ? 0 : all[0].run_window_ns.load(std::memory_order_relaxed);
  const std::uint64_t window_ns = posted ? posted : kWindowNs;
  if (!decided) {  // what the workers measured, though no one decided
    const ProbeFigures f = pooled_figures(all);
    r.shared_ns = f.shared_ns;
    r.replica_ns = f.replica_ns;
    r.hot_ns = f.hot_ns;
    r.windows = f.windows;
    r.chosen = "plain";
    const unsigned kinds = f.hot_ns > 0 ? 3 : 2;
    r.why = fmt::format("the run ended before the probe decided (it takes {}-{} ms)",
                        probe_ms(1, kinds, window_ns),
                        probe_ms(kPairs, kinds, window_ns));
    return r;
  }
  // The figures the decision was made from (record 0's), and what every worker took.
  const WorkerProgress& run = all[0];
  r.shared_ns = run.run_shared_ns.load(std::memory_order_relaxed);
  r.replica_ns = run.run_replica_ns.load(std::memory_order_relaxed);
  r.hot_ns = run.run_hot_ns.load(std::memory_order_relaxed);
  r.windows = run.run_windows.load(std::memory_order_relaxed);
  r.chosen = to_string(static_cast<WeightLayout>(decided - 1));
  r.why = choose_layout({r.shared_ns, r.replica_ns, r.windows, r.hot_ns, window_ns}).why;
  return r;
}

std::string layout_line(const TrainConfig& c, std::span<const WorkerProgress> all) {
  if (c.mode != Mode::hogwild || no_probe(c, static_cast<unsigned>(all.size()))) return {};
  for (const WorkerProgress& p : all)
    if (p.layout.load(std::memory_order_acquire) == 0) return {};
  const TrainResult::LayoutChoice l = layout_choice(c, all);
  return fmt::format("layout {}, chosen by the probe: {}", l.chosen, l.why);
}

std::unique_ptr<EpochPart> make_layout_probe(const ModeWorker& w) {
  if (no_probe(w.config, w.world)) return nullptr;
  auto replica = std::make_unique<Replica>(w.params, own_ranges(w), Replica::kAuto,
                                           /*atomic=*/false, bias_mean(w));
  // The hot window where the parent made it for the probe (probe_offers_hot): the
  // one --hot-k makes is the writer parts'. It flushes as a replica merges under
  // --merge-every auto (WriteBackInterval): on SpamAssassin, 1543 hot features
  // flushed every 256 examples (--hot-flush's default) ran two workers at 0.77 of the
  // ceiling, every 1024 at 0.87, every 4096 at 0.90 (12 interleaved repetitions).
  std::unique_ptr<HotWindow> hot;
  if (w.hot_window && !w.config.hot_k)
    hot = std::make_unique<HotWindow>(w.params, *w.hot, w.hot_window, WriteBackInterval::kAuto,
                                      w.config.workers, w.hot_rows);
  const std::span<WorkerProgress> all = w.arena.array<WorkerProgress>("progress");
  return std::make_unique<LayoutProbe>(
      std::move(replica), all.first(w.world), w.rank, std::move(hot),
      probe_window_ns(w.config.epochs, w.train->rows(), w.world));
}

}  // namespace hogwild::detail
