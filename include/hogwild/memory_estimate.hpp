// A run's memory, estimated before its first epoch from the sizes of everything it
// will hold at its peak, in every process of its tree: what the run is checked
// against (MemAvailable for the tree, RLIMIT_AS for each process), said in the
// run's first lines and recorded in its summary beside the peak it then measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hogwild {

struct MemoryPart {
  std::string what;         // "parameter arena (weights, optimiser state, 2 snapshots)"
  std::uint64_t bytes = 0;  // in the whole tree: a part each worker holds, times the workers
  bool held = false;        // already in memory when estimated (the rows, the parent's own)
  // Held only on a path a run may take: an evaluation of the live weights while
  // workers run (a restarted worker's, an epoch whose snapshot was not taken) copies them.
  bool possible = false;
};

struct MemoryEstimate {
  // Largest first; shared pages (the arena, the rows) once, as the tree holds them.
  std::vector<MemoryPart> parts;
  std::uint64_t total = 0;  // the tree's peak: the parts' sum, `possible` ones left out
  std::uint64_t worst = 0;  // with them: what the run is checked against
  std::uint64_t held = 0;   // already in memory when estimated
  // The most address space one process maps (RLIMIT_AS, ulimit -v, limits each
  // process on its own): the parent, and one worker (or parameter server).
  std::uint64_t parent_address_space = 0, worker_address_space = 0;
  // "812.3 MiB (parameter arena 420.0 MiB, training rows 229.0 MiB, ...)": the total
  // and its `shown` largest parts; then the worst case where it is more.
  std::string describe(std::size_t shown = 6) const;
};

}  // namespace hogwild
