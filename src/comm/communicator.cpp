// What every Communicator backend shares.
#include "comm/communicator.hpp"

#include <fmt/format.h>

namespace hogwild {

std::vector<std::vector<std::byte>> Communicator::exchange(
    const std::vector<std::vector<std::byte>>&) {
  throw ConfigError(fmt::format("the {} communicator has no point-to-point messages (a parameter "
                                "server across nodes needs Gloo's)", backend()));
}

}  // namespace hogwild
