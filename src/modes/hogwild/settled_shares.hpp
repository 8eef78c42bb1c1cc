// Which features a replica's merge adds as a share of their change, not whole.
//
// A merge adds what a worker's copy changed since its last merge (replica.hpp).
// Where a feature is in few of the interval's rows, that change is a few steps,
// and the W workers' changes add up as W workers' Hogwild! steps would. Where it
// is in many, each copy's weight settles where that worker's rows pull it, and
// each worker's change is the same correction: the W changes together overshoot it
// W times. Two workers merging in step then flip the error's sign at every merge;
// past two it grows. On the RCV1-like set at lr 0.5, 16 replicas merged every
// ~2,000 examples diverged on 16 cores (docs/PERFORMANCE.md, "16 cores"), and on
// 2 cores 16 replicas merged every 20,000 examples (which makes their intervals
// overlap as 16 cores' would) ended at test loss 20.8 where plain ended at 0.45.
//
// How far a copy settles in F examples, for a feature in a fraction p of the rows
// with mean square value m there: each of its F p steps takes about lr c m of the
// error away (c: the loss's largest second derivative in the margin,
// Model::margin_curvature), so the copy keeps (1 - lr c m)^(F p) of it, and
//   settled(F) = 1 - (1 - lr c m)^(F p) = 1 - exp(-rate F),  rate = -p log(1 - lr c m).
// The W changes then carry W settled(F) corrections, and the merge adds
//   share(F) = 1 / max(1, W settled(F))
// of each: the corrections add to one where they would overshoot, and a feature that
// barely moves between merges keeps its whole change (share 1). The bias (x = 1 in
// every row) comes out at 1 / W, the mean the replica already takes for it.
// lr is the run's first step size, its largest: a decayed one settles less, so its
// share is then smaller than it needs to be, never larger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hogwild/dataset.hpp"

namespace hogwild::detail {

class SettledShares {
 public:
  struct Feature {
    std::uint32_t index;  // the feature (its coordinate in tensor 0)
    double rate;          // settled(F) = 1 - exp(-rate F); +inf: one step settles it
  };
  // How many of the rows measure() reads, at most (drawn at random): the features
  // whose share is below 1 are in a good part of the rows, which a few thousand
  // rows find.
  static constexpr std::size_t kSampleRows = 4096;

  SettledShares() = default;  // none: every change added whole
  // The features of `features` that W writers' merges every `most` examples (the
  // longest interval the merges can have) would overshoot; the others are dropped.
  SettledShares(std::vector<Feature> features, unsigned writers, double most);
  // From rows [begin, end) of sparse `rows` (a sample of kSampleRows of them):
  // each feature's fraction of the rows and mean square value there.
  // lr: the run's first step size a row (a batch of B rows: lr / B, as the linear
  // models' steps scale each row's slope); curvature: Model::margin_curvature.
  // only: where not empty, the features to measure (a hot window's), and no
  // others: memory then grows with them, not with the features of the rows (a bit
  // a feature, against 8 bytes).
  static SettledShares measure(const Dataset& rows, std::size_t begin, std::size_t end,
                               unsigned writers, double lr, double curvature, double most,
                               std::span<const std::uint32_t> only = {});

  bool empty() const noexcept { return features_.empty(); }
  const std::vector<Feature>& features() const noexcept { return features_; }
  // The share of feature i's (features()[i]'s) change that a merge after `every`
  // examples adds: kept until `every` changes (an adapting interval changes it
  // seldom; the merges take the interval, or the examples since the last merge
  // where fewer, at an epoch's end).
  std::span<const float> at(double every);
  // share(F) for a feature of this rate among `writers` writers.
  static float share(double rate, double every, unsigned writers) noexcept;

 private:
  std::vector<Feature> features_;  // ascending by index
  unsigned writers_ = 1;
  double every_ = -1;          // the interval `shares_` is for
  std::vector<float> shares_;  // by feature, for every_
};

}  // namespace hogwild::detail
