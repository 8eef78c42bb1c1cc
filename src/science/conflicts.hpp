// --conflicts (hogwild/telemetry.hpp says what it measures): the sampled
// coordinates, chosen by the parent and kept in the arena with their values at the
// start, and each worker's counters for them, written by that worker alone. The
// steps run with MeasuredUpdate (update_policy.hpp), whose writes come to
// measured_add here. Private to the trainer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/telemetry.hpp"

namespace hogwild::detail {

constexpr std::size_t kMaxSampled = 160;

struct SampledCoordinate {
  std::uint32_t tensor = 0;
  std::uint32_t why = 0;      // 0 bias, 1 top-k, 2 random
  std::uint64_t index = 0;
  std::uint64_t degree = 0;   // feature-indexed models: rows holding the feature
  float initial = 0;          // its value when the run (or this resumed part) began
};

// One worker's counters for one sampled coordinate.
struct ConflictSlot {
  double intended;
  std::uint64_t writes, conflicts;
};

// The arena's "conflicts" block: the sample, then [worker][kMaxSampled] slots.
struct ConflictBlock {
  std::uint32_t count;
  SampledCoordinate coordinates[kMaxSampled];
};
std::size_t conflict_block_bytes(unsigned workers);

// The parent: chooses the sample (bias coordinates, the top `k` features by degree
// for a feature-indexed model, `k` random coordinates of the first tensor) into
// the block.
void choose_conflict_sample(std::byte* block, const std::vector<TensorSpec>& specs,
                            const Dataset& train, bool feature_indexed, std::size_t k,
                            std::uint64_t seed);
// The parent, once the weights hold their starting values (after a restore).
void record_conflict_start(std::byte* block, const ParamSet& params);
// A worker, before its first step: its process's sample (which measured_add reads) and
// the slots it writes.
void start_conflict_sampling(std::byte* block, unsigned worker, const ParamSet& params, bool atomic);
// The parent, after the workers: the figures.
Conflicts summarize_conflicts(const std::byte* block, unsigned workers, const ParamSet& params);

}  // namespace hogwild::detail
