// The NCCL Communicator: one rank per GPU (NCCL 2.28 refuses two ranks on one GPU,
// "Duplicate GPU detected"), the collectives on device memory (every span given to
// it is in MemorySpace::device), on a stream of its own.
//
// Nothing waits for ever. The communicator is non-blocking (config.blocking = 0):
// initialisation and each collective return at once, and the calling thread then
// watches the stream and ncclCommGetAsyncError; on an error, on abort(), on the
// run's stop flag or past the timeout it calls ncclCommAbort (which frees the
// communicator's resources on this rank) and throws CommError naming what it
// waited for.
//
// NCCL is loaded at run time (dlopen "libnccl.so.2", then the toolkit's copy the
// build found): the library loads on machines without it, and a run that asks for
// it there is told why not.
//
// The unique id: ncclGetUniqueId starts a bootstrap thread in its caller, so rank 0
// makes it in its own worker (a process that forks no more) and publishes it in a
// NcclIdSlot of the run's host arena, where the other ranks of the machine wait
// for it (with the timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/gloo.hpp"

namespace hogwild::detail {

struct NcclIdSlot {
  std::atomic<std::uint32_t> state{0};  // 0: empty, 1: published, 2: rank 0 failed
  char id[128] = {};                    // ncclUniqueId
  char error[256] = {};                 // rank 0's reason when state is 2
};

// Rank 0 (`make`): makes the id and publishes it; the others wait for it. The
// publish-and-wait half is host logic: `make` is where NCCL is called.
void exchange_nccl_id(NcclIdSlot& slot, unsigned rank, char (&id)[128],
                      const std::function<void(char (&)[128])>& make,
                      std::chrono::milliseconds timeout, const std::atomic<std::int32_t>* stop);

// NCCL's unique id for a group whose ranks are on several machines, through the
// rendezvous store (under options.run_id and options.tag, beside the keys of the
// Gloo group made with the same options): rank 0 makes it (`make`: ncclGetUniqueId)
// and writes it; the others wait for it, up to options.timeout, and CommError says
// why not: rank 0 failed (its reason, from the store), the run stopped, or the time
// ran out. ConfigError when built without Gloo (the store is Gloo's). gloo_erase_run
// erases the keys. (comm/nccl_rendezvous.cpp)
void store_exchange_nccl_id(const GlooOptions& options, unsigned rank, char (&id)[128],
                            const std::function<void(char (&)[128])>& make,
                            const std::atomic<std::int32_t>* stop);

// ConfigError unless this machine's GPUs can hold `ranks` NCCL ranks (one each).
void check_nccl_ranks(unsigned ranks, int devices);

// Rank `rank` of `size` on GPU `device`, joining the group whose unique id is `id`
// (from exchange_nccl_id). ConfigError where NCCL cannot be loaded; CommError when
// the group does not form within `timeout`.
std::unique_ptr<Communicator> make_nccl_communicator(unsigned rank, unsigned size, int device,
                                                     const char (&id)[128],
                                                     std::chrono::milliseconds timeout,
                                                     const std::atomic<std::int32_t>* stop);
// Rank 0's half of exchange_nccl_id: ncclGetUniqueId.
void make_nccl_id(char (&id)[128]);

}  // namespace hogwild::detail
