// ps: a parameter server (DistBelief's Downpour SGD) on one machine. Each worker is
// a model replica training a private copy of the weights (GradientCapture), pushing
// its accumulated updates to --servers server processes, each the one writer of its
// shard of the arena's weights, and fetching fresh weights every so often
// (trainer/ps.hpp). Replicas are respawned as hogwild's workers are; a server is not.
#include "hogwild/gradient.hpp"
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
};
}  // namespace

const ModeDef& ps_mode() {
  static const Ps mode;
  return mode;
}

}  // namespace hogwild::detail
