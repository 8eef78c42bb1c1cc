#include "trainer/memory_meter.hpp"

#include <algorithm>
#include <mutex>

#include "process.hpp"

namespace hogwild::detail {

namespace {

// This process's last reading of its page tables taken with no worker alive, and
// its resident counters then.
struct AloneReading {
  pid_t pid = 0;  // a forked child's copy is not its own
  std::chrono::steady_clock::time_point at;
  MemoryShare share, counters;
};
std::mutex g_alone_mutex;
AloneReading g_alone;

std::uint64_t moved(std::uint64_t base, std::uint64_t then, std::uint64_t now) {
  return now >= then ? base + (now - then) : base - std::min(base, then - now);
}

}  // namespace

void TreeMeter::sample_alone() {
  const auto now = std::chrono::steady_clock::now();
  MemoryShare self;
  {
    std::lock_guard g(g_alone_mutex);
    const MemoryShare counters = resident_counters();
    if (g_alone.pid == getpid() && now - g_alone.at < std::chrono::seconds(1) && counters.ok) {
      self.anon = moved(g_alone.share.anon, g_alone.counters.anon, counters.anon);
      self.shmem = moved(g_alone.share.shmem, g_alone.counters.shmem, counters.shmem);
    } else {
      self = memory_share();
      g_alone = {getpid(), now, self, counters};
    }
  }
  account(self.bytes(), {});
}

void TreeMeter::sample(std::span<const Process> processes) {
  account(memory_share().bytes(), processes);
}

void TreeMeter::account(std::uint64_t self, std::span<const Process> processes) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t tree = gone_ + self;
  gone_ = 0;
  if (const ForkServer* server = ForkServer::get()) tree += memory_share(server->pid()).bytes();
  for (const auto& p : processes)  // an exiting process may read as less, a reaped one as 0
    tree += std::max(memory_share(p.pid).bytes(), p.exit_sample);
  peak_ = std::max(peak_, tree);
  const auto cost = std::chrono::steady_clock::now() - t0;
  next_ = std::chrono::steady_clock::now() +
          std::clamp<std::chrono::steady_clock::duration>(
              40 * cost, std::chrono::milliseconds(250), std::chrono::seconds(5));
}

}  // namespace hogwild::detail
