// The kinds of option a declaration is made from (hogwild/options.hpp): each
// builds an OptionInfo whose get and set read and write one field of a
// TrainConfig, given as `field`, a generic lambda `[](auto& c) -> auto& { return
// c.epochs; }` (the same for a const and a mutable config), and whose set says
// what is wrong with a value the way every other error of the tools does.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "hogwild/options.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild::options {

// What every option shares; the kinds below fill in get and set.
struct Declared {
  std::string name;
  Concern concern;
  std::string help;
  std::string value_text;
};

// A whole number of `low` to `high` (a negative one only where low < 0).
template <std::integral T>
T parse_whole(const std::string& name, const std::string& text, T low, T high) {
  const bool sign = low < 0 && !text.empty() && text[0] == '-';
  const std::size_t digits = text.size() - sign;
  if (digits == 0 || text.find_first_not_of("0123456789", sign) != std::string::npos)
    throw ConfigError(low < 0 ? fmt::format("--{}: expected a whole number, got {}", name, text)
                              : fmt::format("--{}: expected a whole number of 0 or more, got {}",
                                            name, text));
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high)
    throw ConfigError(fmt::format("--{} {} is out of range ({} to {})", name, text, low, high));
  return value;
}

template <class Field>
OptionInfo whole(Declared d, Field field, std::uint64_t low, std::uint64_t high) {
  using T = std::remove_cvref_t<decltype(field(std::declval<TrainConfig&>()))>;
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  o.range = fmt::format("{} to {}", low, high);
  o.get = [field](const TrainConfig& c) { return fmt::format("{}", field(c)); };
  o.set = [field, name = d.name, low, high](TrainConfig& c, const std::string& text) {
    field(c) = static_cast<T>(parse_whole<std::uint64_t>(name, text, low, high));
  };
  return o;
}

// `auto` (the field set to `automatic`) or a whole number of `low` to `high`.
template <class Field>
OptionInfo whole_or_auto(Declared d, Field field, std::uint64_t low, std::uint64_t high,
                         std::uint64_t automatic) {
  using T = std::remove_cvref_t<decltype(field(std::declval<TrainConfig&>()))>;
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  o.range = fmt::format("{} to {}, or auto", low, high);
  o.get = [field, automatic](const TrainConfig& c) {
    return field(c) == automatic ? std::string("auto") : fmt::format("{}", field(c));
  };
  o.set = [field, name = d.name, low, high, automatic](TrainConfig& c, const std::string& text) {
    if (text == "auto") {
      field(c) = static_cast<T>(automatic);
      return;
    }
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
      throw ConfigError(fmt::format("--{}: expected auto or a whole number of {} to {}, got \"{}\"",
                                    name, low, high, text));
    field(c) = static_cast<T>(parse_whole<std::uint64_t>(name, text, low, high));
  };
  return o;
}

// A finite number; `low_open`: more than low, else at least low. `unit` (" seconds")
// follows the bounds in the message.
double parse_real(const std::string& name, const std::string& text);

template <class Field>
OptionInfo real(Declared d, Field field, double low, double high, bool low_open = false,
                std::string unit = "") {
  using T = std::remove_cvref_t<decltype(field(std::declval<TrainConfig&>()))>;
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  const bool bounded = std::isfinite(high);
  if (!bounded)
    o.range = fmt::format("{} {}{}", low_open ? "more than" : "at least", low, unit);
  else if (low_open)
    o.range = fmt::format("more than {} and at most {}{}", low, high, unit);
  else
    o.range = fmt::format("from {} to {}{}", low, high, unit);
  o.get = [field](const TrainConfig& c) { return fmt::format("{}", field(c)); };
  o.set = [field, name = d.name, low, high, low_open, said = o.range](TrainConfig& c,
                                                                      const std::string& text) {
    const double v = parse_real(name, text);
    if (v < low || (low_open && v == low) || v > high)
      throw ConfigError(fmt::format("--{} must be {}, got {}", name, said, text));
    if constexpr (std::is_same_v<T, float>) {  // read as a float: "0.1" is 0.1f exactly
      float f = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
      if (ec == std::errc::result_out_of_range)  // (f is left 0: --l2 1e39 trained without L2)
        throw ConfigError(fmt::format("--{} {}: out of a float's range ({:g} to {:g} in size, or 0)",
                                      name, text, std::numeric_limits<float>::denorm_min(),
                                      std::numeric_limits<float>::max()));
      field(c) = f;
    } else {
      field(c) = static_cast<T>(v);
    }
  };
  return o;
}

// On or off; `inverted`: the option is on when the field is false (--no-bias).
template <class Field>
OptionInfo flag(Declared d, Field field, bool inverted = false) {
  OptionInfo o{d.name, d.concern, d.help, ""};
  o.get = [field, inverted](const TrainConfig& c) {
    return std::string(field(c) != inverted ? "true" : "false");
  };
  o.set = [field, inverted, name = d.name](TrainConfig& c, const std::string& text) {
    if (text != "true" && text != "false")
      throw ConfigError(fmt::format("--{}: expected true or false, got {}", name, text));
    field(c) = (text == "true") != inverted;
  };
  return o;
}

template <class Field>
OptionInfo text(Declared d, Field field) {
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  o.get = [field](const TrainConfig& c) { return field(c); };
  o.set = [field](TrainConfig& c, const std::string& value) { field(c) = value; };
  return o;
}

// One of a few names: `parse` (the type's own, a ConfigError naming the choices)
// and its to_string.
template <class Field, class Parse, class Show>
OptionInfo choice(Declared d, Field field, Parse parse, Show show) {
  OptionInfo o{d.name, d.concern, d.help, d.value_text};
  o.get = [field, show](const TrainConfig& c) { return std::string(show(field(c))); };
  o.set = [field, parse](TrainConfig& c, const std::string& value) { field(c) = parse(value); };
  return o;
}

// Anything else: its own get and set.
OptionInfo custom(Declared d, std::function<std::string(const TrainConfig&)> get,
                  std::function<void(TrainConfig&, const std::string&)> set);

// What a resume must match: the model and how it learns, how the rows are dealt.
inline OptionInfo resumed(OptionInfo o) {
  o.resume_must_match = true;
  return o;
}

// What every node of a run must be given alike (their collectives' shapes, the
// cadence they meet at), beyond what a resume must match.
inline OptionInfo agreed(OptionInfo o) {
  o.nodes_must_match = true;
  return o;
}

}  // namespace hogwild::options
