// A training mode, named: how the workers share the parameters (docs/MODES.md).
// serial, hogwild, atomic, lock, ddp, dp and ps are built in; each is one file under src/modes/
// plus one line in src/modes/registry.cpp, and the trainer asks the mode (not a
// switch) what it needs: so a new mode touches no other code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hogwild {

class Mode {
 public:
  // The built-in modes (their registry order).
  static const Mode serial, hogwild, atomic, lock, ddp, dp, ps;

  constexpr Mode() = default;  // hogwild
  // The mode registered at index `id` (mode_names() order); parse_mode finds it by name.
  constexpr explicit Mode(std::uint8_t id) noexcept : id_(id) {}
  constexpr std::uint8_t id() const noexcept { return id_; }
  friend constexpr bool operator==(Mode, Mode) = default;

 private:
  std::uint8_t id_ = 1;
};

inline constexpr Mode Mode::serial{0};
inline constexpr Mode Mode::hogwild{1};
inline constexpr Mode Mode::atomic{2};
inline constexpr Mode Mode::lock{3};
inline constexpr Mode Mode::ddp{4};
inline constexpr Mode Mode::dp{5};
inline constexpr Mode Mode::ps{6};

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
