#include "trainer/memory_meter.hpp"

#include <algorithm>

#include "process.hpp"

namespace hogwild::detail {

void TreeMeter::sample(std::span<const Process> processes) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t tree = gone_ + memory_share().bytes();
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
