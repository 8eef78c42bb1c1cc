#include "modes/hogwild/settled_shares.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hogwild/rng.hpp"

namespace hogwild::detail {

SettledShares::SettledShares(std::vector<Feature> features, unsigned writers, double most)
    : writers_(std::max(writers, 1u)) {
  if (writers_ < 2) return;  // one writer's change is never counted twice
  // share(most) < 1: W (1 - exp(-rate most)) > 1, rate most > -log(1 - 1/W).
  const double least = -std::log1p(-1.0 / writers_);
  for (const Feature& f : features)
    if (f.rate * most > least) features_.push_back(f);
  std::sort(features_.begin(), features_.end(),
            [](const Feature& a, const Feature& b) { return a.index < b.index; });
  shares_.resize(features_.size());  // (at() then allocates nothing: merges are noexcept)
}

SettledShares SettledShares::measure(const Dataset& rows, std::size_t begin, std::size_t end,
                                     unsigned writers, double lr, double curvature, double most,
                                     std::span<const std::uint32_t> only) {
  if (writers < 2 || end <= begin || rows.dense()) return {};
  // The features measured: every one of the rows', slot j for feature j; or those
  // of `only`, in ascending order, found through a bit a feature.
  std::vector<std::uint32_t> wanted(only.begin(), only.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<std::uint64_t> in_wanted;
  if (!only.empty()) {
    in_wanted.assign(rows.cols() / 64 + 1, 0);
    for (const std::uint32_t j : wanted)
      if (j < rows.cols()) in_wanted[j / 64] |= std::uint64_t{1} << (j % 64);
  }
  const std::size_t slots = only.empty() ? rows.cols() : wanted.size();
  const auto slot = [&](std::uint32_t j) -> std::size_t {
    if (only.empty()) return j;
    if (!((in_wanted[j / 64] >> (j % 64)) & 1)) return slots;
    return static_cast<std::size_t>(std::lower_bound(wanted.begin(), wanted.end(), j) - wanted.begin());
  };
  // All the rows where they are few, else kSampleRows drawn at random (seeded): a
  // stride could keep in step with a period of the rows.
  const std::size_t n = end - begin;
  const std::size_t sampled = std::min(n, kSampleRows);
  Rng rng(n);
  std::vector<std::uint32_t> count(slots);
  std::vector<float> squares(slots);
  for (std::size_t i = 0; i < sampled; ++i) {
    const RowView x = rows.row(begin + (sampled == n ? i : rng.below(n)));
    for (std::uint32_t k = 0; k < x.nnz; ++k) {
      const std::size_t at = slot(x.index[k]);
      if (at == slots) continue;
      const float v = x.at(k);
      ++count[at];
      squares[at] += v * v;
    }
  }
  std::vector<Feature> features;
  for (std::size_t i = 0; i < slots; ++i) {
    if (count[i] == 0) continue;
    const double p = static_cast<double>(count[i]) / static_cast<double>(sampled);
    const double step = lr * curvature * squares[i] / count[i];  // of the error, a step
    const double rate = step < 1 ? -p * std::log1p(-step) : std::numeric_limits<double>::infinity();
    features.push_back({only.empty() ? static_cast<std::uint32_t>(i) : wanted[i], rate});
  }
  return SettledShares(std::move(features), writers, most);
}

float SettledShares::share(double rate, double every, unsigned writers) noexcept {
  const double settled = -std::expm1(-rate * every);  // (rate +inf: 1)
  return static_cast<float>(1 / std::max(1.0, writers * settled));
}

std::span<const float> SettledShares::at(double every) {
  if (every != every_) {
    for (std::size_t i = 0; i < features_.size(); ++i)
      shares_[i] = share(features_[i].rate, every, writers_);
    every_ = every;
  }
  return shares_;
}

}  // namespace hogwild::detail
