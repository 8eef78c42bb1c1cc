// The live progress line of hogwild_train on a terminal: the trainer's LiveProgress
// drawn in place (carriage return, erase to the end of the line) once an epoch has
// run longer than a delay, at most 4 times a second, and erased before anything
// else is printed, so the output of a run is the same as without it.
#pragma once

#include <cstdio>
#include <mutex>

#include "hogwild/trainer.hpp"

namespace hogwild::tools {

class ProgressLine {
 public:
  static constexpr double kDefaultDelay = 2;   // seconds into an epoch before it shows
  static constexpr double kInterval = 0.25;    // seconds between redraws

  // Draws on `out` only when `enabled` and `out` is a terminal. The delay is
  // HOGWILD_PROGRESS_DELAY (seconds) when set, else kDefaultDelay.
  ProgressLine(std::FILE* out, bool enabled);
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // False when nothing will be drawn: no LiveCallback is needed.
  bool active() const { return active_; }
  // The trainer's LiveCallback (may be called on its ticker thread).
  void update(const LiveProgress& p);
  // Erases the line if it is shown; call before printing anything else.
  void clear();

 private:
  std::size_t width() const;

  std::mutex mutex_;
  std::FILE* out_;
  const bool active_;
  double delay_ = kDefaultDelay;
  bool shown_ = false;
  double last_draw_ = -1;
};

}  // namespace hogwild::tools
