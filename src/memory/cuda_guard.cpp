#include "memory/cuda_guard.hpp"

#include <unistd.h>

#include <atomic>
#include <fmt/format.h>

#include "hogwild/error.hpp"

namespace hogwild::detail {

namespace {
std::atomic<pid_t> g_initialised_by{0};
}  // namespace

void note_cuda_initialised() noexcept {
  g_initialised_by.store(getpid(), std::memory_order_relaxed);
}

pid_t cuda_initialised_by() noexcept { return g_initialised_by.load(std::memory_order_relaxed); }

void check_cuda_usable(std::string_view what) {
  const pid_t by = cuda_initialised_by();
  if (by == 0 || by == getpid()) return;
  throw ConfigError(fmt::format(
      "{}: this process ({}) was forked from process {} after that process had initialised "
      "CUDA, and CUDA does not survive fork; start GPU workers from a fork server made before "
      "CUDA (hogwild_train does this for --device cuda; in a program of your own call "
      "hogwild::start_fork_server() first thing in main and train with "
      "WorkerStart::fork_server)",
      what, getpid(), by));
}

}  // namespace hogwild::detail
