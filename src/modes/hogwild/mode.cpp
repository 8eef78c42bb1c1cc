// hogwild: forked workers update the shared weights with no lock (Niu et al. 2011);
// the intended race is described in include/hogwild/update_policy.hpp.
#include "hogwild/model_base.hpp"
#include "modes/hogwild/writer_parts.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Hogwild final : public ModeDef {
 public:
  std::string_view name() const override { return "hogwild"; }
  std::string_view summary() const override { return "lock-free"; }
  std::uint8_t access() const override { return access_index<HogwildUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::hogwild; }
  bool replicas() const override { return true; }
  // hogwild's options: --merge-every, --hot-k, and across nodes the node sync.
  void make_parts(const ModeWorker& w, std::vector<std::unique_ptr<EpochPart>>& parts) const override {
    add_writer_parts(w, *this, parts);
  }
};
}  // namespace

const ModeDef& hogwild_mode() {
  static const Hogwild mode;
  return mode;
}

}  // namespace hogwild::detail
