// NCCL's unique id for a group whose ranks are on several machines, through the run's
// rendezvous store (comm/rendezvous_store.hpp): rank 0 writes it, the others wait
// for it. Not the Gloo backend's: it only shares the store.
#include <chrono>
#include <cstring>
#include <thread>

#include "comm/nccl.hpp"
#include "comm/rendezvous_store.hpp"
#include "hogwild/error.hpp"

namespace hogwild::detail {

void store_exchange_nccl_id(const GlooOptions& options, unsigned rank, char (&id)[128],
                            const std::function<void(char (&)[128])>& make,
                            const std::atomic<std::int32_t>* stop) {
  KeyStore store = open_store(options, options.timeout);
  if (rank == 0) {
    try {
      make(id);
    } catch (const std::exception& e) {
      const std::string why = e.what();
      store.set(kNcclIdErrorKey, std::vector<char>(why.begin(), why.end()));
      throw;
    }
    store.set(kNcclIdKey, std::vector<char>(id, id + sizeof id));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  for (;;) {
    if (const auto value = store.find(kNcclIdKey)) {
      if (value->size() != sizeof id)
        throw CommError(fmt::format("rank {}: the NCCL id in the rendezvous store has {} bytes, "
                                    "not {}", rank, value->size(), sizeof id));
      std::memcpy(id, value->data(), sizeof id);
      return;
    }
    if (const auto why = store.find(kNcclIdErrorKey))
      throw CommError(fmt::format("rank {}: rank 0 could not make the NCCL group's id: {}", rank,
                                  *why));
    if (stop && stop->load(std::memory_order_relaxed))
      throw CommError(fmt::format("rank {}: the run stopped while it waited for rank 0's NCCL id",
                                  rank));
    if (std::chrono::steady_clock::now() > deadline)
      throw CommError(fmt::format("rank {}: rank 0 wrote no NCCL id to the rendezvous store {} "
                                  "within {:.1f}s", rank, options.rendezvous,
                                  options.timeout.count() / 1000.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hogwild::detail
