#include "progress_line.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "hogwild/metrics.hpp"

namespace hogwild::tools {

ProgressLine::ProgressLine(std::FILE* out, bool enabled)
    : out_(out), active_(enabled && isatty(fileno(out))) {
  if (const char* d = std::getenv("HOGWILD_PROGRESS_DELAY")) {
    char* end = nullptr;
    const double v = std::strtod(d, &end);
    if (end != d && *end == '\0' && v >= 0 && std::isfinite(v)) delay_ = v;
  }
}

void ProgressLine::update(const LiveProgress& p) {
  std::lock_guard lock(mutex_);
  if (!active_ || p.epoch_time < delay_ || (shown_ && p.time - last_draw_ < kInterval)) return;
  // One column short of the width: a full row would wrap on some terminals.
  const std::string text = format_live_progress(p, width() - 1);
  std::fprintf(out_, "\r%s\033[K", text.c_str());
  std::fflush(out_);
  shown_ = true;
  last_draw_ = p.time;
}

void ProgressLine::clear() {
  std::lock_guard lock(mutex_);
  if (!shown_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  shown_ = false;
}

std::size_t ProgressLine::width() const {
  winsize ws{};
  if (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col;
  return 80;
}

}  // namespace hogwild::tools
