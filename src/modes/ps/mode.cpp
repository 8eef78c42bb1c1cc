// ps: a parameter server (DistBelief's Downpour SGD) on one machine. Each worker is
// a model replica training a private copy of the weights (GradientCapture), pushing
// its accumulated updates to --servers server processes, each the one writer of its
// shard of the arena's weights, and fetching fresh weights every so often
// (modes/ps/ps.hpp). Replicas are respawned as hogwild's workers are; a server is not.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hogwild/gradient.hpp"
#include "hogwild/metrics.hpp"
#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Ps final : public ModeDef {
 public:
  std::string_view name() const override { return "ps"; }
  std::string_view summary() const override {
    return "parameter server: replicas push updates to sharded servers, fetch weights";
  }
  std::uint8_t access() const override { return access_index<GradientCapture>(); }
  bool parameter_server() const override { return true; }

  void summarize(const TrainConfig& c, const TrainResult& r, nlohmann::json& j) const override {
    const auto& p = r.ps;
    j["ps"] = {{"servers", c.servers},
               {"push_every", c.push_every},
               {"fetch_every", c.fetch_every},
               {"staleness_bound", c.staleness < 0 ? nlohmann::json() : nlohmann::json(c.staleness)},
               {"key_ranges", c.hashed_keys ? "hashed" : "contiguous"},
               {"pushes", p.pushes},
               {"fetches", p.fetches},
               {"bytes_pushed", p.bytes},
               {"staleness_at_push_mean", p.mean_push_staleness},
               {"staleness_at_push_max", p.max_push_staleness},
               {"staleness_at_fetch_mean", p.mean_staleness},
               {"staleness_at_fetch_max", p.max_staleness},
               {"push_seconds", p.push_seconds},
               {"server_records", p.server_records},
               {"server_keys", p.server_keys},
               {"lost_examples", p.lost_examples},
               {"rounds", p.rounds},
               {"network_bytes", p.network_bytes}};
  }

  std::string result_text(const TrainConfig&, const TrainResult& r) const override {
    const auto& p = r.ps;
    std::string line = fmt::format(
        ", ps: {} pushes ({}), staleness at push mean {:.2f} max {}, at fetch mean {:.2f} max {}, "
        "{} coordinates in {} records a server",
        p.pushes, format_mib(p.bytes), p.mean_push_staleness, p.max_push_staleness,
        p.mean_staleness, p.max_staleness, fmt::join(p.server_keys, "/"),
        fmt::join(p.server_records, "/"));
    if (p.rounds)
      line += fmt::format(", {} server rounds ({} to other nodes)", p.rounds,
                          format_mib(p.network_bytes));
    if (p.lost_examples)
      line += fmt::format(", {} examples' updates lost with dead replicas", p.lost_examples);
    return line;
  }
};
}  // namespace

const ModeDef& ps_mode() {
  static const Ps mode;
  return mode;
}

}  // namespace hogwild::detail
