// The peak memory of a run's process tree, measured by its parent: the sum over the
// parent, its workers (and parameter servers) and the fork server of each one's
// share of the anonymous and shared-memory pages it maps (memory_share, so every
// page counts once: the arena and the rows once, each worker's private pages), at
// moments the parent samples; each worker's own sample at its exit stands in for
// it at the first sample after. Page cache (the program, a mapped input) is left
// out, and so is what loading the data held before the run began.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>

namespace hogwild::detail {

class TreeMeter {
 public:
  struct Process {
    pid_t pid;
    // What it said it held as it finished (0: not yet): it counts at least that,
    // however much of its memory its exit has already given back.
    std::uint64_t exit_sample = 0;
  };
  // Samples this process, the fork server (if any) and `processes` now, plus what
  // gone() was told since the last sample: what processes that ended since then held
  // at their exit.
  void sample(std::span<const Process> processes);
  // As sample({}), where no worker of this process is alive (a serial run's epochs,
  // a run's end): this process's share then comes from its last reading when that
  // is under a second old, no fork happened since and it shared no page then (its
  // share equal to its resident counters), moved by the change of its resident
  // counters since (resident_counters(): what it allocated or freed, the arena it
  // mapped), instead of a walk of its page tables. Sharing nothing at either moment,
  // the change of its resident bytes is the change of its share. A Python parent's
  // walk costs 2-3 ms; a sweep's or a notebook's runs follow each other closely.
  void sample_alone();
  // How many sample_alone() calls moved an earlier reading (for tests).
  static std::uint64_t moved_readings() noexcept;
  // Processes that ended holding `bytes` (counted at the next sample).
  void gone(std::uint64_t bytes) noexcept { gone_ += bytes; }
  // Whether the next periodic sample is due: each reads every process's page
  // tables (about 10 ms a GB; 1.4 ms for a Python parent with scipy loaded), so they
  // come at most every few hundred ms, and further apart the more they cost; the
  // first 250 ms after the meter starts. A run shorter than that is sampled at its
  // end alone (its arena and rows still mapped, every worker's exit counted).
  bool due() const noexcept { return std::chrono::steady_clock::now() >= next_; }
  std::uint64_t peak() const noexcept { return peak_; }

 private:
  // Adds the others (the fork server, `processes`, those gone) to this process's
  // `self` bytes, read from t0 on (the next sample's time follows the cost).
  void account(std::chrono::steady_clock::time_point t0, std::uint64_t self,
               std::span<const Process> processes);
  std::uint64_t peak_ = 0;
  std::uint64_t gone_ = 0;
  std::chrono::steady_clock::time_point next_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
};

}  // namespace hogwild::detail
