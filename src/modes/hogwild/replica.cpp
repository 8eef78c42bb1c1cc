#include "modes/hogwild/replica.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hogwild/update_policy.hpp"

namespace hogwild {

namespace {

constexpr std::size_t kShortRange = 16;  // floats: shorter runs merge inline
constexpr std::size_t kAhead = 16;       // runs: how far ahead a merge prefetches
constexpr std::size_t kNowhere = ~std::size_t{0};  // a settled feature outside the ranges

// Mode atomic: one read-modify-write per changed coordinate, none lost. (Mode
// hogwild: detail::dense_merge_shared, vectorised.)
void merge_atomic(float* shared, float* copy, float* base, std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) detail::merge_coordinate(shared + j, copy[j], base[j], true);
}

}  // namespace

Replica::Replica(const ParamSet& shared, std::vector<Ranges> ranges, std::size_t every,
                 bool atomic, MeanMerge mean, std::size_t start)
    : shared_(shared), ranges_(std::move(ranges)), interval_(every, start, "Replica"),
      atomic_(atomic), mean_(std::move(mean.tensors)),
      share_(1.f / static_cast<float>(std::max(mean.writers, 1u))),
      settled_(std::move(mean.features)) {
  std::vector<ParamSet::Tensor> t;
  copy_.reserve(shared.count());
  base_.reserve(shared.count());
  ranges_.resize(shared.count());
  mean_.resize(shared.count(), false);
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    std::size_t last = 0;
    for (const auto& [begin, end] : ranges_[i]) {
      if (begin < last || end < begin || end > shared.size(i))
        throw std::invalid_argument(fmt::format(
            "Replica: the ranges of tensor '{}' ({} floats) are not sorted, disjoint and "
            "inside it: [{}, {}) after {} (Model::trained_ranges)",
            shared.tensors()[i].name, shared.size(i), begin, end, last));
      last = end;
    }
  }
  for (std::size_t i = 0; i < shared.count(); ++i) {
    const ParamSet::Tensor& s = shared.tensors()[i];
    auto& c = copy_.emplace_back(s.size);
    for (std::size_t j = 0; j < s.size; ++j) c[j] = detail::relaxed_load(s.data + j);
    // The base holds only the ranges' coordinates, packed in order: a sparse model's
    // merge then reads one scattered private array, not two.
    auto& b = base_.emplace_back();
    if (ranges_[i].empty() || mean_[i]) {
      b = c;
    } else {
      for (const auto& [begin, end] : ranges_[i]) b.insert(b.end(), c.begin() + begin, c.begin() + end);
    }
    t.push_back({s.name, c.data(), s.size});
  }
  local_ = ParamSet(std::move(t), /*exclusive=*/true);
  // Each settled feature's place in the packed base of tensor 0 (its ranges are
  // sorted, as the features are).
  if (shared.count() > 0 && !mean_[0] && !settled_.empty()) {
    const Ranges& runs = ranges_[0];
    std::size_t r = 0, packed = 0;
    for (const detail::SettledShares::Feature& f : settled_.features()) {
      if (runs.empty()) {
        settled_at_.push_back(f.index < shared.size(0) ? f.index : kNowhere);
        continue;
      }
      for (; r < runs.size() && runs[r].second <= f.index; ++r) packed += runs[r].second - runs[r].first;
      // (A feature of the rows is in the ranges of the rows, Model::trained_ranges:
      // kNowhere only for shares measured on other rows, which merge whole.)
      settled_at_.push_back(r < runs.size() && runs[r].first <= f.index
                                ? packed + (f.index - runs[r].first) : kNowhere);
    }
  }
  interval_.start();
}

void Replica::merge() noexcept {
  const std::uint64_t begun = interval_.begin();
  if (!settled_at_.empty()) {
    // First the settled features' shares: the pass below then finds them unchanged.
    const std::span<const float> shares = settled_.at(static_cast<double>(interval_.writing()));
    float* s = shared_.data(0);
    float* c = copy_[0].data();
    float* b = base_[0].data();
    for (std::size_t i = 0; i < shares.size(); ++i) {
      if (shares[i] >= 1 || settled_at_[i] == kNowhere) continue;  // (added whole below)
      const std::uint32_t j = settled_.features()[i].index;
      detail::merge_coordinate_share(s + j, c[j], b[settled_at_[i]], shares[i]);
    }
  }
  for (std::size_t t = 0; t < shared_.count(); ++t) {
    float* s = shared_.data(t);
    float* c = copy_[t].data();
    float* b = base_[t].data();
    // Called, never taken by address: the address of a target_clones function is an
    // IRELATIVE relocation that the dynamic loader resolves before the library's PLT
    // is set up, and under TSan the resolver itself calls through the PLT (crash at
    // load time).
    const auto run = [&](std::size_t begin, std::size_t end, float* base) {
      if (atomic_)
        merge_atomic(s + begin, c + begin, base, end - begin);
      else
        detail::dense_merge_shared(s + begin, c + begin, base, end - begin);
    };
    if (mean_[t]) {  // (its base: all of it, its ranges ignored)
      for (std::size_t j = 0; j < shared_.size(t); ++j)
        detail::merge_coordinate_share(s + j, c[j], b[j], share_);
      continue;
    }
    if (ranges_[t].empty()) {
      run(0, shared_.size(t), b);
      continue;
    }
    const Ranges& runs = ranges_[t];
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const auto [begin, end] = runs[r];
      if (r + kAhead < runs.size()) {  // scattered lines: fetch them some runs ahead
        __builtin_prefetch(s + runs[r + kAhead].first, 1);
        __builtin_prefetch(c + runs[r + kAhead].first, 1);
      }
      if (end - begin >= kShortRange) {
        run(begin, end, b);
        b += end - begin;
        continue;
      }
      // A sparse model's runs are mostly one or two features long (SpamAssassin:
      // 61k features in 57k runs): inline, not a call and a vector loop's tail each.
      for (std::size_t j = begin; j < end; ++j, ++b)
        detail::merge_coordinate(s + j, c[j], *b, atomic_);
    }
  }
  interval_.end(begun);
  ++merges_;
}

}  // namespace hogwild
