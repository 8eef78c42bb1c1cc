// The NCCL communicator in a build without it (no CUDA toolkit or nccl.h, or
// -Dnccl=disabled): it says so. Defined by qualified name, as cuda/missing.cpp is,
// so that a changed declaration is a compile error in every build.
#include "comm/nccl.hpp"
#include "hogwild/error.hpp"

namespace {
[[noreturn]] void missing() {
  throw hogwild::ConfigError(
      "this build has no NCCL communicator (the CUDA toolkit's nccl.h and "
      "libnccl.so.2 were not found, or -Dnccl=disabled)");
}
}  // namespace

void hogwild::detail::make_nccl_id(char (&)[128]) { missing(); }

std::unique_ptr<hogwild::Communicator> hogwild::detail::make_nccl_communicator(
    unsigned, unsigned, int, const char (&)[128], std::chrono::milliseconds,
    const std::atomic<std::int32_t>*) {
  missing();
}
