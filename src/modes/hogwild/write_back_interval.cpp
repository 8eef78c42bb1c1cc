#include "modes/hogwild/write_back_interval.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <time.h>

namespace hogwild::detail {

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::uint64_t thread_cpu_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

WriteBackInterval::WriteBackInterval(std::size_t every, std::size_t start, const char* what)
    : every_(every) {
  if (every_ == kAuto) {
    adaptive_ = true;
    every_ = std::clamp(start, kAutoMin, kAutoMax);
  }
  if (every_ == 0) throw std::invalid_argument(std::string(what) + ": write back every 0 examples");
}

void WriteBackInterval::start() noexcept {
  if (adaptive_) last_end_ns_ = steady_ns();
}

std::uint64_t WriteBackInterval::begin() const noexcept { return adaptive_ ? steady_ns() : 0; }

void WriteBackInterval::end(std::uint64_t begun) noexcept {
  if (adaptive_) {
    const std::uint64_t end = steady_ns();
    if (last_end_ns_ != 0 && pending_ > 0 && begun > last_end_ns_) {
      const double per_example =
          static_cast<double>(begun - last_end_ns_) / static_cast<double>(pending_);
      const double want = kAutoRatio * static_cast<double>(end - begun) / per_example;
      // The geometric mean with the last choice: one slow write-back (a page fault,
      // the other core's burst) moves the interval by half as much.
      const double next = std::sqrt(want * static_cast<double>(every_));
      every_ = static_cast<std::size_t>(std::clamp(next, double(kAutoMin), double(kAutoMax)));
    }
    last_end_ns_ = end;
  }
  pending_ = 0;
}

}  // namespace hogwild::detail
