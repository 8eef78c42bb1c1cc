#include "trainer/memory_meter.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "process.hpp"

namespace hogwild::detail {

namespace {

// This process's last reading of its page tables taken when it shared no page with
// another process (its share then equal to its resident counters), and its
// counters then. Any fork since (a worker's, Python's multiprocessing, os.fork)
// makes it stale: the pages shared since may still be.
struct AloneReading {
  std::uint64_t forks = 0;
  std::chrono::steady_clock::time_point at;
  MemoryShare share, counters;
  bool ok = false;
};
std::atomic<std::uint64_t> g_forks{0};
std::mutex* g_alone_mutex = new std::mutex;  // never destroyed; a child's fresh (atfork)
AloneReading g_alone;
std::atomic<std::uint64_t> g_moved{0};
const int g_alone_atfork = pthread_atfork(
    nullptr, [] { g_forks.fetch_add(1, std::memory_order_relaxed); },
    [] {
      g_alone_mutex = new std::mutex;
      g_alone.ok = false;
    });

std::uint64_t moved(std::uint64_t base, std::uint64_t then, std::uint64_t now) {
  return now >= then ? base + (now - then) : base - std::min(base, then - now);
}

// Equal but for what the process allocated between the two reads (the reads' own
// buffers; under ASan its allocator's pages): a page shared with a forked copy would
// differ by far more (most of a process is shared after a fork).
bool same(std::uint64_t a, std::uint64_t b) {
  return (a > b ? a - b : b - a) <= std::max<std::uint64_t>(std::uint64_t{256} << 10, b / 100);
}

}  // namespace

std::uint64_t TreeMeter::moved_readings() noexcept { return g_moved.load(std::memory_order_relaxed); }

void TreeMeter::sample_alone() {
  const auto t0 = std::chrono::steady_clock::now();
  const MemoryShare counters = resident_counters();
  const std::uint64_t forks = g_forks.load(std::memory_order_relaxed);
  AloneReading last;
  {
    std::lock_guard g(*g_alone_mutex);
    last = g_alone;
  }
  MemoryShare self;
  if (last.ok && last.forks == forks && t0 - last.at < std::chrono::seconds(1) && counters.ok) {
    self.anon = moved(last.share.anon, last.counters.anon, counters.anon);
    self.shmem = moved(last.share.shmem, last.counters.shmem, counters.shmem);
    g_moved.fetch_add(1, std::memory_order_relaxed);
  } else {
    self = memory_share();
    // Kept only where nothing was shared: a share below the counters would move by
    // the wrong amount when the sharing ends.
    const bool alone = self.ok && counters.ok && same(self.anon, counters.anon) &&
                       same(self.shmem, counters.shmem);
    std::lock_guard g(*g_alone_mutex);
    g_alone = {forks, t0, self, counters, alone};
  }
  account(t0, self.bytes(), {});
}

void TreeMeter::sample(std::span<const Process> processes) {
  const auto t0 = std::chrono::steady_clock::now();
  account(t0, memory_share().bytes(), processes);
}

void TreeMeter::account(std::chrono::steady_clock::time_point t0, std::uint64_t self,
                        std::span<const Process> processes) {
  std::uint64_t tree = gone_ + self;
  gone_ = 0;
  if (const ForkServer* server = ForkServer::get()) tree += memory_share(server->pid()).bytes();
  for (const auto& p : processes)  // an exiting process may read as less, a reaped one as 0
    tree += std::max(memory_share(p.pid).bytes(), p.exit_sample);
  peak_ = std::max(peak_, tree);
  const auto cost = std::chrono::steady_clock::now() - t0;  // this process's reading included
  next_ = std::chrono::steady_clock::now() +
          std::clamp<std::chrono::steady_clock::duration>(
              40 * cost, std::chrono::milliseconds(250), std::chrono::seconds(5));
}

}  // namespace hogwild::detail
