// The NCCL group's host logic: the unique id handed from rank 0 to the others
// through the run's host arena, and the one-rank-per-GPU rule.
#include <unistd.h>

#include <cstring>
#include <fmt/format.h>

#include "comm/nccl.hpp"
#include "hogwild/error.hpp"

namespace hogwild::detail {

void exchange_nccl_id(NcclIdSlot& slot, unsigned rank, char (&id)[128],
                      const std::function<void(char (&)[128])>& make,
                      std::chrono::milliseconds timeout, const std::atomic<std::int32_t>* stop) {
  if (rank == 0) {
    try {
      make(id);
    } catch (const std::exception& e) {
      std::strncpy(slot.error, e.what(), sizeof slot.error - 1);
      slot.state.store(2, std::memory_order_release);
      throw;
    }
    std::memcpy(slot.id, id, sizeof id);
    slot.state.store(1, std::memory_order_release);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::uint32_t s = slot.state.load(std::memory_order_acquire);
    if (s == 1) {
      std::memcpy(id, slot.id, sizeof id);
      return;
    }
    if (s == 2)
      throw CommError(fmt::format("rank {}: rank 0 could not make the NCCL group's id: {}", rank,
                                  slot.error));
    if (stop && stop->load(std::memory_order_relaxed))
      throw CommError(fmt::format("rank {}: the run stopped while it waited for rank 0's NCCL id",
                                  rank));
    if (std::chrono::steady_clock::now() > deadline)
      throw CommError(fmt::format("rank {}: rank 0 published no NCCL id within {:.1f}s", rank,
                                  timeout.count() / 1000.0));
    ::usleep(1000);
  }
}

void check_nccl_ranks(unsigned ranks, int devices) {
  if (devices < 0 || ranks > static_cast<unsigned>(devices))
    throw ConfigError(fmt::format(
        "NCCL runs one rank per GPU (NCCL 2.28 refuses two ranks on one GPU: \"Duplicate GPU "
        "detected\"), and {} rank(s) were asked for on a machine with {} GPU(s): give --workers {} "
        "or fewer",
        ranks, std::max(devices, 0), std::max(devices, 0)));
}

}  // namespace hogwild::detail
