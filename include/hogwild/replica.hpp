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

#include "hogwild/model.hpp"

namespace hogwild {

class Replica {
 public:
  // A private copy of `shared` (relaxed loads). ranges[t] are the coordinates of
  // tensor t that a merge visits (Model::trained_ranges; missing or empty: all of
  // them; std::invalid_argument unless sorted, disjoint and inside the tensor). atomic: a merge adds with one atomic read-modify-write per coordinate
  // (mode atomic), else with a relaxed load and store (mode hogwild: two workers
  // merging the same coordinate at the same instant may lose one of the two adds,
  // as two Hogwild updates may). Sgd only: the copy carries no optimiser state.
  Replica(const ParamSet& shared, std::vector<Model::Ranges> ranges, std::size_t every,
          bool atomic);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // The worker's copy, in the shape of the shared set: what the model's step updates.
  const ParamSet& params() const noexcept { return local_; }
  // Counts `examples` more trained on the copy; true when a merge is due.
  bool due(std::size_t examples) noexcept { return (pending_ += examples) >= every_; }
  // For every coordinate in the ranges: shared += copy - base (skipped where the
  // copy did not change it), then copy = base = shared.
  void merge() noexcept;
  std::uint64_t merges() const noexcept { return merges_; }

 private:
  ParamSet shared_, local_;
  std::vector<std::vector<float>> copy_, base_;
  std::vector<Model::Ranges> ranges_;
  std::size_t every_, pending_ = 0;
  bool atomic_;
  std::uint64_t merges_ = 0;
};

}  // namespace hogwild
