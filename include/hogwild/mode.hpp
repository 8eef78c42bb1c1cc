// A training mode, named: how the workers share the parameters (docs/MODES.md).
// serial, hogwild, atomic, lock, ddp, dp, ps and striped are built in; each is its
// own folder under src/modes/ plus its name in meson.build's builtin_modes, and the
// trainer asks the mode what it needs (src/modes/mode_def.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// The built-in modes, in their registry order: HOGWILD_BUILTIN_MODES(X), X(name) for
// each, comes from the build's one list of them (meson.build's builtin_modes, into
// hogwild/config.hpp). Each is `const detail::ModeDef& <name>_mode()`, defined in
// src/modes/<name>/mode.cpp.
#include "hogwild/config.hpp"

namespace hogwild {

namespace detail {
#define HOGWILD_MODE_ID_(name) name,
enum class BuiltinMode : std::uint8_t { HOGWILD_BUILTIN_MODES(HOGWILD_MODE_ID_) };
#undef HOGWILD_MODE_ID_
}  // namespace detail

class Mode {
 public:
  // The built-in modes: Mode::serial, Mode::hogwild, ...
#define HOGWILD_MODE_DECLARE_(name) static const Mode name;
  HOGWILD_BUILTIN_MODES(HOGWILD_MODE_DECLARE_)
#undef HOGWILD_MODE_DECLARE_

  constexpr Mode() = default;  // hogwild
  // The mode registered at index `id` (mode_names() order); parse_mode finds it by name.
  constexpr explicit Mode(std::uint8_t id) noexcept : id_(id) {}
  constexpr std::uint8_t id() const noexcept { return id_; }
  friend constexpr bool operator==(Mode, Mode) = default;

 private:
  std::uint8_t id_ = static_cast<std::uint8_t>(detail::BuiltinMode::hogwild);
};

#define HOGWILD_MODE_DEFINE_(name) \
  inline constexpr Mode Mode::name{static_cast<std::uint8_t>(detail::BuiltinMode::name)};
HOGWILD_BUILTIN_MODES(HOGWILD_MODE_DEFINE_)
#undef HOGWILD_MODE_DEFINE_

std::string_view to_string(Mode m) noexcept;
// Throws ConfigError naming the valid modes.
Mode parse_mode(std::string_view s);
// Every registered mode's name, in registry order.
std::vector<std::string> mode_names();
// Every registered mode with what it does, for --help: "serial (one process, the
// reference), hogwild (lock-free), ...".
std::string mode_help();
// False for a mode in which the calling process alone trains (serial): TrainConfig's
// `workers` is then 1 whatever it says.
bool is_parallel(Mode m);
// The number of workers mode m trains with when asked for `workers`: that many
// processes (is_parallel), or threads splitting each mini-batch (dp); 1 for serial.
unsigned workers_used(Mode m, unsigned workers);

}  // namespace hogwild
