// serial: the calling process trains alone, with plain loads and stores.
#include "hogwild/model_base.hpp"
#include "modes/mode_def.hpp"

namespace hogwild::detail {

namespace {
class Serial final : public ModeDef {
 public:
  std::string_view name() const override { return "serial"; }
  std::string_view summary() const override { return "one process, the reference"; }
  std::uint8_t access() const override { return access_index<SerialUpdate>(); }
  std::optional<DeviceAccess> device_access() const override { return DeviceAccess::serial; }
  bool parallel() const override { return false; }
};
}  // namespace

const ModeDef& serial_mode() {
  static const Serial mode;
  return mode;
}

}  // namespace hogwild::detail
