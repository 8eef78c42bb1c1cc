// The NCCL communicator in a build without it (no CUDA toolkit or nccl.h, or
// -Dnccl=disabled): it says so.
#include "comm/nccl.hpp"
#include "hogwild/error.hpp"

namespace hogwild::detail {

namespace {
[[noreturn]] void missing() {
  throw ConfigError("this build has no NCCL communicator (the CUDA toolkit's nccl.h and "
                    "libnccl.so.2 were not found, or -Dnccl=disabled)");
}
}  // namespace

void make_nccl_id(char (&)[128]) { missing(); }

std::unique_ptr<Communicator> make_nccl_communicator(unsigned, unsigned, int, const char (&)[128],
                                                     std::chrono::milliseconds,
                                                     const std::atomic<std::int32_t>*) {
  missing();
}

}  // namespace hogwild::detail
