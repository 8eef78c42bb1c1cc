// lock: one robust interprocess mutex held around each mini-batch's read, gradient
// and update ("locking updates"): the baseline that shows what Hogwild saves.
#include "hogwild/model_base.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Lock final : public ModeDef {
 public:
  std::string_view name() const override { return "lock"; }
  std::string_view summary() const override { return "one mutex around each mini-batch"; }
  std::uint8_t access() const override { return access_index<LockUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::lock; }
  bool locks_batches() const override { return true; }
  // hogwild's options: --hot-k, and across nodes the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    add_writer_parts(w, *this, parts);
  }
};
}  // namespace

const ModeDef& lock_mode() {
  static const Lock mode;
  return mode;
}

}  // namespace hogwild::detail
