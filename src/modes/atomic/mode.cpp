// atomic: like hogwild, but every coordinate's update is one atomic
// read-modify-write, so no update is lost.
#include "hogwild/model_base.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Atomic final : public ModeDef {
 public:
  std::string_view name() const override { return "atomic"; }
  std::string_view summary() const override { return "atomic add per coordinate"; }
  std::uint8_t access() const override { return access_index<AtomicUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::atomic; }
  bool replicas() const override { return true; }
  bool atomic_merges() const override { return true; }
  // hogwild's options: --merge-every, --hot-k, and across nodes the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    add_writer_parts(w, *this, parts);
  }
};
}  // namespace

const ModeDef& atomic_mode() {
  static const Atomic mode;
  return mode;
}

}  // namespace hogwild::detail
