#include "modes/hogwild/layout_rule.hpp"

#include <fmt/format.h>

namespace hogwild::detail {

namespace {

// The shared and the replica phases measured, as positive finite figures.
bool measured(const ProbeFigures& f) noexcept {
  return positive(f.shared_ns) && positive(f.replica_ns);
}

// Each choice's weight (kReplicaWins), in the order a tie goes (the first listed):
// plain where hot or replicas are not cheaper by the bar, hot before replicas.
// `bit`: the choice's phase in contenders().
struct Weighed {
  WeightLayout layout;
  unsigned bit;
  double weight;
};
struct Weights {
  Weighed w[3];
  std::size_t n = 0;
};
Weights weighed(const ProbeFigures& f) noexcept {
  Weights w;
  w.w[w.n++] = {WeightLayout::plain, 1u << 0, f.shared_ns};
  if (positive(f.hot_ns)) w.w[w.n++] = {WeightLayout::hot, 1u << 2, f.hot_ns / kReplicaWins};
  w.w[w.n++] = {WeightLayout::replicas, 1u << 1, f.replica_ns / kReplicaWins};
  return w;
}

// The cheapest by weight; a private layout wins a tie with plain (at kReplicaWins
// exactly), hot wins one with replicas.
std::size_t cheapest(const Weights& w) noexcept {
  std::size_t best = 0;
  for (std::size_t i = 1; i < w.n; ++i)
    if (best == 0 ? w.w[i].weight <= w.w[best].weight : w.w[i].weight < w.w[best].weight) best = i;
  return best;
}

}  // namespace


unsigned contenders(const ProbeFigures& f) noexcept {
  if (!measured(f)) return 0b111;
  const Weights w = weighed(f);
  const std::size_t best = cheapest(w);
  unsigned left = positive(f.hot_ns) ? 0 : 1u << 2;  // hot unmeasured: not ruled out
  for (std::size_t i = 0; i < w.n; ++i)
    if (i == best || w.w[i].weight < kClearCall * w.w[best].weight) left |= w.w[i].bit;
  // Plain cheapest: the cheaper private layout stays in the running too, so that
  // plain is never a clear call (layout_rule.hpp, at kClearCall).
  if (w.w[best].layout == WeightLayout::plain && w.n > 1) {
    std::size_t rival = 1;
    for (std::size_t i = 2; i < w.n; ++i)
      if (w.w[i].weight < w.w[rival].weight) rival = i;
    left |= w.w[rival].bit;
  }
  return left;
}

bool clear_call(const ProbeFigures& f) noexcept {
  if (!measured(f)) return false;
  const unsigned left = contenders(f) & (positive(f.hot_ns) ? 0b111u : 0b011u);
  return (left & (left - 1)) == 0;
}

LayoutDecision choose_layout(const ProbeFigures& f) {
  if (!measured(f))
    return {WeightLayout::plain, "the probe measured no whole window of each kind"};
  std::string figures = fmt::format(
      "an example cost {:.0f} ns on the shared weights, {:.0f} ns on a replica, its merges "
      "included ({:.2f}x)",
      f.shared_ns, f.replica_ns, f.replica_ns / f.shared_ns);
  if (positive(f.hot_ns))
    figures += fmt::format(", and {:.0f} ns with hot coordinates, their flushes included ({:.2f}x)",
                           f.hot_ns, f.hot_ns / f.shared_ns);
  figures += fmt::format("; {} at {:.2f}x or less, {}over {} windows of {} ms",
                         positive(f.hot_ns) ? "the cheaper of the two wins" : "replicas win",
                         kReplicaWins, positive(f.hot_ns) ? "hot on a tie, " : "", f.windows,
                         f.window_ns / 1'000'000);
  const Weights w = weighed(f);
  return {w.w[cheapest(w)].layout, figures};
}

}  // namespace hogwild::detail
