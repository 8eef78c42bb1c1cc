// Replicated Hogwild! (TrainConfig::merge_every, --merge-every F). Under plain
// Hogwild every update goes straight to the shared weights; on data whose examples
// share a hot head of features (the bias, the frequent words) those few cache lines
// bounce between cores on every example, and two workers on two cores ran slower
// than one (docs/PERFORMANCE.md). With a replica a worker trains a private copy of
// the parameters, and every F of its examples (and at the end of each epoch) adds
// what its copy changed since the last merge to the shared weights, without a lock,
// then reloads its copy from them — HOGWILD++'s and DimmWitted's per-core replicas.
// The shared weights hold every worker's updates, each at most F examples late:
// that staleness is the price (measured in docs/PERFORMANCE.md); F trades it
// against the cost of a merge, one pass over the coordinates the worker's own rows
// can change (a sparse model's: its features, short runs merged inline, the base
// packed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hogwild/param_set.hpp"
#include "modes/hogwild/settled_shares.hpp"
#include "modes/hogwild/write_back_interval.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild {

// The tensors a replica merges as its writers' mean, and the features of tensor 0
// whose changes it adds as a share (Replica's constructor).
struct MeanMerge {
  std::vector<bool> tensors;  // by tensor; missing: false
  unsigned writers = 1;
  detail::SettledShares features = {};  // none: tensor 0's changes added whole
};

class Replica final : public detail::PrivateCopyPart {
 public:
  // A private copy of `shared` (relaxed loads). ranges[t] are the coordinates of
  // tensor t that a merge visits (Model::trained_ranges; missing or empty: all of
  // them; std::invalid_argument unless sorted, disjoint and inside the tensor).
  // atomic: a merge adds with one atomic read-modify-write per coordinate (mode
  // atomic), else with a relaxed load and store (mode hogwild: two workers merging
  // the same coordinate at the same instant may lose one of the two adds, as two
  // Hogwild updates may). Sgd only: the copy carries no optimiser state.
  //
  // mean: the tensors that add their change divided by `writers`, the number of
  // replicas merging into `shared`, with fetch_add in every mode (a lost add there
  // is a whole merge's change) — the bias of a linear model on sparse rows
  // (bias_mean, writer_parts.hpp), which every example of every worker changes.
  // Between two merges each replica's bias settles where its own examples pull it
  // (at lr 0.25 on RCV1-like within some 20 examples, against F in the thousands):
  // each change is the same correction, and their sum overshoots by the others'
  // ones. With two writers merging in step (--balance steal starts them together)
  // the error then flips sign at every merge without shrinking, so noise walks the
  // bias off (RCV1-like, seed 1, 16 runs: final test loss 0.4336-1.18, three over
  // 0.48, where one worker's seeds end 0.4305-0.4467); past two it grows. Their
  // mean is that correction once: 0.4306-0.4529 over 16 runs. Where a bias moves
  // little between merges (small F or lr) the mean is a 1/writers step size on it.
  // Tensor 0's features in mean.features (settled_shares.hpp: those in enough of
  // the rows that each writer's copy settles between merges) add the share of their
  // change that the interval gives them, with fetch_add as the mean tensors do. Any
  // other coordinate adds its whole change: a dense model's weights and an MF
  // model's rows are not one correction repeated.
  //
  // every == kAuto: F adapts (WriteBackInterval: a merge then costs about 5 % of the
  // worker's time, F within [16, 4096], starting at kAutoStart).
  static constexpr std::size_t kAuto = detail::WriteBackInterval::kAuto;
  static constexpr std::size_t kAutoStart = detail::WriteBackInterval::kAutoStart;
  static constexpr std::size_t kAutoMin = detail::WriteBackInterval::kAutoMin;
  static constexpr std::size_t kAutoMax = detail::WriteBackInterval::kAutoMax;
  // start: with kAuto, the F it starts at (kAutoStart unless given; clamped).
  Replica(const ParamSet& shared, std::vector<Ranges> ranges, std::size_t every,
          bool atomic, MeanMerge mean = {}, std::size_t start = kAutoStart);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // The worker's copy, in the shape of the shared set: what the model's step updates.
  const ParamSet& params() const noexcept { return local_; }
  // Counts `examples` more trained on the copy; true when a merge is due.
  bool due(std::size_t examples) noexcept { return interval_.due(examples); }
  // For every coordinate in the ranges: shared += copy - base (skipped where the
  // copy did not change it), then copy = base = shared.
  void merge() noexcept;
  std::uint64_t merges() const noexcept { return merges_; }
  // Examples between merges now (with kAuto: the latest choice).
  std::size_t every() const noexcept { return interval_.every(); }
  void report(WorkerProgress& p) const override {
    p.merges.store(merges_, std::memory_order_relaxed);
    p.merge_every.store(interval_.every(), std::memory_order_relaxed);
  }

  // Its part of the step loop: the steps train the copy, merged when due and at
  // the epoch's end, the worker's place published then (PrivateCopyPart).
  const ParamSet* trained() const noexcept override { return &params(); }

 protected:
  bool copy_due(std::size_t examples) override { return due(examples); }
  void write_back() override { merge(); }

 private:
  ParamSet shared_, local_;
  std::vector<std::vector<float>> copy_, base_;
  std::vector<Ranges> ranges_;
  detail::WriteBackInterval interval_;
  bool atomic_;
  std::vector<bool> mean_;  // by tensor: merged as the writers' mean
  float share_;             // of a mean tensor's change a merge adds: 1 / writers
  detail::SettledShares settled_;       // tensor 0's features merged as a share
  std::vector<std::size_t> settled_at_;  // each one's place in base_[0]
  std::uint64_t merges_ = 0;
};

}  // namespace hogwild
