// A run's memory before its first epoch: the estimate of its process tree's peak,
// part by part (hogwild/memory_estimate.hpp), and the check of it against the
// machine and each process's address-space limit. Made by the parent once it knows
// the model's shapes and the arena's size, before the arena exists.
#pragma once

#include <cstdint>
#include <vector>

#include "hogwild/memory_estimate.hpp"

namespace hogwild::detail {

struct Run;

struct MemoryPlan {
  MemoryEstimate estimate;
  // What the run still has to allocate in memory (not the rows and heap it holds,
  // nor an arena in a file: --shm-dir's pages are page cache).
  std::uint64_t to_allocate = 0;
  // What the parent and one worker will map, part by part (their sums are the
  // estimate's parent_address_space and worker_address_space).
  std::vector<MemoryPart> parent_space, worker_space;
};

// `arena`: the arena's bytes (Arena::required_bytes of its blocks); `window`: the
// hot window each worker maps privately (--hot-k); `other_rows`: rows the caller
// holds beside the run's own (a byte set widened for a model that reads floats).
MemoryPlan plan_memory(const Run& run, std::uint64_t arena, std::uint64_t window,
                       std::uint64_t other_rows);

// Throws ResourceError, naming the largest parts, when what the run has still to
// allocate does not fit in the memory available (MemAvailable), or when the
// parent's or one worker's address space would pass the address-space limit
// (RLIMIT_AS, ulimit -v, which limits each process on its own).
void check_memory(const MemoryPlan& plan);

}  // namespace hogwild::detail
