// ddp: PyTorch's DistributedDataParallel on shared memory. Every worker computes
// the gradient of its own mini-batch (GradientCapture), the gradients are averaged
// over the workers by the Communicator, and the averaged update is applied once:
// the workers' replicas are the one copy in the arena, which every worker reads
// between steps and of which each updates its own slice (the reduce-scatter's
// "in place" form; modes/ddp/gradient_sync.hpp). The workers step in lockstep, so a
// dead one stops the run instead of being respawned alone.
#include "hogwild/gradient.hpp"
#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Ddp final : public ModeDef {
 public:
  std::string_view name() const override { return "ddp"; }
  std::string_view summary() const override {
    return "synchronous data parallel: gradients averaged every step";
  }
  std::uint8_t access() const override { return access_index<GradientCapture>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::gradient; }
  bool synchronous() const override { return true; }
};
}  // namespace

const ModeDef& ddp_mode() {
  static const Ddp mode;
  return mode;
}

}  // namespace hogwild::detail
