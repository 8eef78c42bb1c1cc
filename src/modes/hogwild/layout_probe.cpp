#include "modes/hogwild/layout_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

#include <fmt/format.h>

#include "data/degrees.hpp"
#include "hogwild/error.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

const char* to_string(WeightLayout l) noexcept {
  switch (l) {
    case WeightLayout::plain: return "plain";
    case WeightLayout::hot: return "hot";
    case WeightLayout::replicas: return "replicas";
    case WeightLayout::automatic: break;
  }
  return "auto";
}

WeightLayout parse_weight_layout(const std::string& name) {
  if (name == "auto") return WeightLayout::automatic;
  if (name == "plain") return WeightLayout::plain;
  if (name == "hot") return WeightLayout::hot;
  if (name == "replicas") return WeightLayout::replicas;
  throw ConfigError("--layout must be auto, plain, hot or replicas, got \"" + name + "\"");
}

}  // namespace hogwild

namespace hogwild::detail {

namespace {

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

constexpr std::uint32_t code(WeightLayout l) noexcept { return 1 + static_cast<std::uint32_t>(l); }

}  // namespace

LayoutDecision choose_layout(const ProbeFigures& f) {
  if (!(f.shared_ns > 0) || !(f.replica_ns > 0) || !std::isfinite(f.shared_ns) ||
      !std::isfinite(f.replica_ns))
    return {WeightLayout::plain, "the probe measured no whole window of each kind"};
  const double ratio = f.replica_ns / f.shared_ns;
  const std::string figures = fmt::format(
      "an example cost {:.0f} ns on the shared weights and {:.0f} ns on a replica, its merges "
      "included ({:.2f}x; replicas win at {:.2f}x or less), over {} windows of {} ms",
      f.shared_ns, f.replica_ns, ratio, kReplicaWins, f.windows, kWindowNs / 1'000'000);
  return {ratio <= kReplicaWins ? WeightLayout::replicas : WeightLayout::plain, figures};
}

std::optional<std::string> no_probe(const TrainConfig& c, unsigned workers) {
  if (c.layout != WeightLayout::automatic) return fmt::format("--layout {}", to_string(c.layout));
  if (c.merge_every) return std::string("--merge-every");
  if (c.hot_k) return std::string("--hot-k");
  if (c.mode != Mode::hogwild) return fmt::format("--mode {}", to_string(c.mode));
  if (workers < 2) return std::string("one worker: no other core writes its cache lines");
  if (workers > kMaxWorkers)
    return fmt::format("more than {} workers: replicas merged every few thousand examples "
                       "diverged at 8 and 16 (docs/PERFORMANCE.md)", kMaxWorkers);
  if (c.optimizer != Optimizer::sgd)
    return fmt::format("--optimizer {}: a replica carries no optimiser state",
                       to_string(c.optimizer));
  if (c.nodes > 1) return std::string("several nodes: the node sync works on the shared weights");
  if (c.device == Device::cuda) return std::string("--device cuda");
  if (c.telemetry || c.conflicts)
    return std::string("--telemetry and --conflicts watch the updates to the shared weights");
  return std::nullopt;
}

void resolve_layout(TrainConfig& c, const Dataset& train, const Model& model) {
  if (c.layout == WeightLayout::replicas && !c.merge_every) c.merge_every = TrainConfig::kMergeAuto;
  if (c.layout != WeightLayout::hot || c.hot_k) return;
  if (!model.feature_indexed())
    throw ConfigError(fmt::format("--layout hot works with the linear models (logistic, hinge, "
                                  "squared), not {}", model.name()));
  if (train.layout() != Layout::sparse)
    throw ConfigError(fmt::format("--layout hot needs sparse rows, and {} is {}", train.source(),
                                  to_string(train.layout())));
  const std::vector<std::uint32_t> degree = feature_degrees(train, train.cols());
  std::size_t hot = 0;
  for (const std::uint32_t d : degree) hot += std::uint64_t{d} * kHotShare >= train.rows();
  c.hot_k = std::clamp<std::size_t>(hot, 1, kHotMost);
}

LayoutProbe::LayoutProbe(std::unique_ptr<Replica> replica, std::span<WorkerProgress> all,
                         unsigned rank)
    : replica_(std::move(replica)), all_(all), rank_(rank), window_(now_ns() / kWindowNs) {
  // A worker restarted after the decision takes it (its replica is fresh from the
  // shared weights).
  for (const WorkerProgress& p : all_) {
    const std::uint32_t chosen = p.layout.load(std::memory_order_acquire);
    if (chosen == 0) continue;
    phase_ = Phase::decided;
    on_replica_ = chosen == code(WeightLayout::replicas);
    all_[rank_].layout.store(chosen, std::memory_order_release);
    break;
  }
}

ProbeFigures LayoutProbe::own() const noexcept {
  ProbeFigures f;
  if (n_[0]) f.shared_ns = ns_[0] / static_cast<double>(n_[0]);
  if (n_[1]) f.replica_ns = ns_[1] / static_cast<double>(n_[1]);
  f.windows = windows_[0] + windows_[1];
  return f;
}

void LayoutProbe::merge(const EpochPlace& place) {
  place.open();
  replica_->merge();
  place.publish();
}

void LayoutProbe::begin_window(std::uint64_t now, const EpochPlace& place) {
  window_ = now / kWindowNs;
  on_replica_ = (window_ & 1) == 1;
  started_ns_ = now;
  examples_ = 0;
  if (on_replica_) merge(place);  // nothing of its own yet: the copy reloads (in its time)
}

void LayoutProbe::end_window(const EpochPlace& place) {
  const int kind = on_replica_ ? 1 : 0;
  if (on_replica_) merge(place);  // the window's changes, in its time
  if (examples_ == 0) return;     // a batch longer than the window: nothing measured
  ns_[kind] += static_cast<double>(now_ns() - started_ns_);
  n_[kind] += examples_;
  ++windows_[kind];
}

bool LayoutProbe::after_batch(const Batch& b, float, const EpochPlace& place) {
  if (on_replica_ && replica_->due(b.size)) merge(place);
  if (phase_ == Phase::decided) return true;
  examples_ += b.size;
  if ((++batches_ & 7) != 0) return true;  // the clock every 8 batches
  const std::uint64_t now = now_ns();
  const std::uint64_t window = now / kWindowNs;
  if (window == window_) return true;
  switch (phase_) {
    case Phase::starting:  // the first whole window begins
      phase_ = Phase::probing;
      begin_window(now, place);
      break;
    case Phase::probing:
      end_window(place);
      if (windows_[0] >= kPairs && windows_[1] >= kPairs) {
        const ProbeFigures f = own();
        WorkerProgress& p = all_[rank_];
        p.probe_shared_ns.store(f.shared_ns, std::memory_order_relaxed);
        p.probe_replica_ns.store(f.replica_ns, std::memory_order_relaxed);
        p.probe_windows.store(f.windows, std::memory_order_relaxed);
        p.probed.store(1, std::memory_order_release);
        phase_ = Phase::waiting;
        on_replica_ = false;
        window_ = window;
        deadline_ = window + kWaitWindows;
        break;
      }
      begin_window(now_ns(), place);
      break;
    case Phase::waiting: {
      window_ = window;
      bool all = true;
      for (const WorkerProgress& p : all_)
        all = all && (p.probed.load(std::memory_order_acquire) != 0 ||
                      p.layout.load(std::memory_order_acquire) != 0);
      if (all || window >= deadline_) decide(place);
      break;
    }
    case Phase::decided:
      break;
  }
  return true;
}

void LayoutProbe::decide(const EpochPlace& place) {
  // One worker that decided at its deadline fixed the layout for the rest.
  std::uint32_t chosen = 0;
  for (const WorkerProgress& p : all_)
    if (const std::uint32_t c = p.layout.load(std::memory_order_acquire)) chosen = c;
  if (chosen == 0) chosen = code(choose_layout(pooled_figures(all_)).layout);
  all_[rank_].layout.store(chosen, std::memory_order_release);
  phase_ = Phase::decided;
  if (chosen == code(WeightLayout::replicas)) {
    on_replica_ = true;
    merge(place);  // the copy reloads from the shared weights
  }
}

void LayoutProbe::end_epoch(float, const EpochPlace& place, bool) {
  if (!on_replica_) return;
  place.open();  // the loop publishes the place after every part's end
  replica_->merge();
}

ProbeFigures pooled_figures(std::span<const WorkerProgress> all) {
  ProbeFigures f;
  unsigned n = 0;
  for (const WorkerProgress& p : all) {
    if (p.probed.load(std::memory_order_acquire) == 0) continue;
    f.shared_ns += p.probe_shared_ns.load(std::memory_order_relaxed);
    f.replica_ns += p.probe_replica_ns.load(std::memory_order_relaxed);
    f.windows += p.probe_windows.load(std::memory_order_relaxed);
    ++n;
  }
  if (n) {
    f.shared_ns /= n;
    f.replica_ns /= n;
  }
  return f;
}

TrainResult::LayoutChoice layout_choice(const TrainConfig& c, std::span<const WorkerProgress> all) {
  TrainResult::LayoutChoice r;
  if (c.mode != Mode::hogwild) return r;
  if (const auto why = no_probe(c, static_cast<unsigned>(all.size()))) {
    r.chosen = c.merge_every ? "replicas" : c.hot_k ? "hot" : "plain";
    r.why = *why;
    return r;
  }
  r.probed = true;
  std::uint32_t first = 0;
  bool same = true;
  for (const WorkerProgress& p : all) {
    const std::uint32_t chosen = p.layout.load(std::memory_order_acquire);
    r.workers.push_back(chosen ? to_string(static_cast<WeightLayout>(chosen - 1)) : "none");
    if (chosen && first && chosen != first) same = false;
    if (chosen && !first) first = chosen;
  }
  const ProbeFigures f = pooled_figures(all);
  r.shared_ns = f.shared_ns;
  r.replica_ns = f.replica_ns;
  r.windows = f.windows;
  if (!first) {
    r.chosen = "plain";
    r.why = fmt::format("the run ended before the probe decided (it takes about {} ms)",
                        (2 * kPairs + 1) * kWindowNs / 1'000'000);
    return r;
  }
  r.chosen = same ? to_string(static_cast<WeightLayout>(first - 1)) : "mixed";
  r.why = choose_layout(f).why;
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
  std::vector<Ranges> mine;  // merging only what this worker's own rows can change
  for (std::size_t t = 0; t < w.params.count(); ++t)
    mine.push_back(w.model->trained_ranges(t, *w.train, w.own_rows.first, w.own_rows.second));
  auto replica = std::make_unique<Replica>(w.params, std::move(mine), Replica::kAuto,
                                           /*atomic=*/false);
  const std::span<WorkerProgress> all = w.arena.array<WorkerProgress>("progress");
  return std::make_unique<LayoutProbe>(std::move(replica), all.first(w.world), w.rank);
}

}  // namespace hogwild::detail
