// How many examples a worker's private copy trains between its write-backs to the
// shared weights (a replica's merge, replica.hpp; a hot window's flush,
// hot_window.hpp): a fixed number, or (kAuto) one adapted as the run goes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace hogwild::detail {

// The steady clock in ns (one clock for every process of the machine): what the
// intervals and the layout probe time with.
std::uint64_t steady_ns() noexcept;
// The calling thread's CPU time in ns: what it ran, the time the scheduler gave
// another process left out (and, with paravirtual steal accounting, the time the
// hypervisor took the core): what the layout probe measures its windows in.
std::uint64_t thread_cpu_ns() noexcept;

class WriteBackInterval {
 public:
  // kAuto: each write-back is timed, and so are the examples since the one before;
  // the interval becomes the number of examples that take kAutoRatio times as long
  // as a write-back (which then costs about 1/kAutoRatio of the worker's time: 5 %),
  // within [kAutoMin, kAutoMax], starting at `start`. The cap bounds staleness,
  // which cost does not see: a replica merged every 4096 examples converged within
  // 1-2 % of serial's test loss on RCV1-like and SpamAssassin, merging only at epoch
  // ends did not (docs/PERFORMANCE.md). The interval depends on timing, so two runs
  // may write back at different points (one worker included).
  static constexpr std::size_t kAuto = static_cast<std::size_t>(-1);
  static constexpr std::size_t kAutoStart = 256, kAutoMin = 16, kAutoMax = 4096;
  static constexpr double kAutoRatio = 20;

  // std::invalid_argument for `every` 0 (`what` names the caller in the message).
  WriteBackInterval(std::size_t every, std::size_t start, const char* what);

  // The copy is ready: the examples from now on are timed (kAuto).
  void start() noexcept;
  // Counts `examples` more trained on the copy; true when a write-back is due.
  bool due(std::size_t examples) noexcept { return (pending_ += examples) >= every_; }
  // Around each write-back: begin() before it, end(begun) after (kAuto: adapts).
  std::uint64_t begin() const noexcept;
  void end(std::uint64_t begun) noexcept;
  // Examples between write-backs now (with kAuto: the latest choice).
  std::size_t every() const noexcept { return every_; }
  // The examples a write-back now writes back: every(), or the examples since the
  // last one where fewer (an epoch's end); at least 1.
  std::size_t writing() const noexcept { return std::clamp<std::size_t>(pending_, 1, every_); }

 private:
  std::size_t every_, pending_ = 0;
  bool adaptive_ = false;
  std::uint64_t last_end_ns_ = 0;  // kAuto: when the previous write-back ended
};

}  // namespace hogwild::detail
