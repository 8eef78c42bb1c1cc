#include "trainer/work_share.hpp"

#include <fmt/format.h>

#include "hogwild/error.hpp"

namespace hogwild {

const char* to_string(Balance b) noexcept { return b == Balance::fixed ? "static" : "steal"; }

Balance parse_balance(const std::string& name) {
  if (name == "steal") return Balance::steal;
  if (name == "static") return Balance::fixed;
  throw ConfigError("--balance must be steal or static, got \"" + name + "\"");
}

}  // namespace hogwild

namespace hogwild::detail {

std::optional<std::string> no_steal(const TrainConfig& c, unsigned workers) {
  if (c.balance == Balance::fixed) return std::string("--balance static");
  if (c.mode != Mode::hogwild) return fmt::format("--mode {}", to_string(c.mode));
  if (workers < 2) return std::string("one worker");
  if (workers > ShareWord::kMaxWorkers)
    return fmt::format("more than {} workers (a share's word names its thief in 7 bits)",
                       ShareWord::kMaxWorkers);
  if (c.partition == Partition::contiguous)
    return std::string("--partition contiguous: each worker keeps its slice of the rows (and a "
                       "replica merges only the features its slice touches)");
  if (c.nodes > 1) return std::string("several nodes: a worker takes rows of its own node only, "
                                      "and the nodes' shares are fixed");
  if (c.device == Device::cuda) return std::string("--device cuda: a worker's rows live on its device");
  if (!c.checkpoint.empty() || !c.resume.empty())
    return std::string("--checkpoint or --resume: a checkpoint keeps each worker's place in its "
                       "own share");
  return std::nullopt;
}

}  // namespace hogwild::detail
