// The registry of modes: HOGWILD_BUILTIN_MODES (hogwild/mode.hpp) in its order, so
// that Mode::serial is index 0, ...
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hogwild/error.hpp"
#include "hogwild/gradient.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/mode.hpp"
#include "modes/mode_def.hpp"

namespace hogwild {

namespace detail {
#define HOGWILD_DECLARE_MODE_(name) const ModeDef& name##_mode();
HOGWILD_BUILTIN_MODES(HOGWILD_DECLARE_MODE_)
#undef HOGWILD_DECLARE_MODE_

namespace {
const std::vector<const ModeDef*>& modes() {
#define HOGWILD_LIST_MODE_(name) &name##_mode(),
  static const std::vector<const ModeDef*> all{HOGWILD_BUILTIN_MODES(HOGWILD_LIST_MODE_)};
#undef HOGWILD_LIST_MODE_
  return all;
}
}  // namespace

std::string join_or(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

std::string mode_names_where(const std::function<bool(const ModeDef&)>& has) {
  std::vector<std::string> names;
  for (const auto* m : modes())
    if (has(*m)) names.emplace_back(m->name());
  return join_or(names);
}

std::string mode_names_where(bool (ModeDef::*has)() const) {
  return mode_names_where([has](const ModeDef& m) { return (m.*has)(); });
}

// (simulated: its steps write the weights, but it measures what the instruments
// would, exactly: they do not watch it.)
bool ModeDef::steps_write_weights() const {
  return access() != access_index<GradientCapture>() && !simulated();
}

std::optional<DeviceAccess> device_access(Mode m) { return mode_def(m).device_access(); }

std::int64_t mode_option(const TrainConfig& cfg, const std::string& name) {
  const auto given = cfg.mode_options.find(name);
  if (given != cfg.mode_options.end()) return given->second;
  for (const auto& o : mode_def(cfg.mode).options())
    if (o.name == name) return o.fallback;
  throw ConfigError(fmt::format("--mode {} has no option --{}", to_string(cfg.mode), name));
}

bool mode_takes(const std::string& modes, Mode m) {
  const std::string_view name = to_string(m);
  std::size_t begin = 0;
  while (begin <= modes.size()) {
    const std::size_t end = std::min(modes.find(" or ", begin), modes.size());
    if (std::string_view(modes).substr(begin, end - begin) == name) return true;
    begin = end + 4;
  }
  return false;
}

std::vector<DeclaredModeOption> declared_mode_options() {
  std::vector<DeclaredModeOption> all;
  for (const auto* m : modes())
    for (const auto& o : m->options()) {
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const auto& d) { return d.option.name == o.name; });
      if (it == all.end())
        all.push_back({o, std::string(m->name())});
      else
        it->modes += " or " + std::string(m->name());
    }
  return all;
}

void check_mode_options(const TrainConfig& cfg) {
  const auto mine = mode_def(cfg.mode).options();
  for (const auto& [key, value] : cfg.mode_options) {
    const std::string& name = key;  // clang 14 does not capture structured bindings
    const auto it = std::find_if(mine.begin(), mine.end(),
                                 [&](const ModeOption& o) { return o.name == name; });
    if (it == mine.end()) {
      std::string which;
      for (const auto& d : declared_mode_options())
        if (d.option.name == name) which = d.modes;
      throw ConfigError(which.empty() ? fmt::format("no mode has an option --{}", name)
                                      : fmt::format("--{} applies to --mode {}", name, which));
    }
    if (value < it->low || value > it->high)
      throw ConfigError(fmt::format("--{} {} is out of range ({} to {})", name, value, it->low,
                                    it->high));
  }
}

const ModeDef& mode_def(Mode m) {
  const auto& all = modes();
  if (m.id() >= all.size())
    throw ConfigError("no mode has id " + std::to_string(m.id()) + " (there are " +
                      std::to_string(all.size()) + ")");
  return *all[m.id()];
}
}  // namespace detail

std::string_view to_string(Mode m) noexcept {
  const auto& all = detail::modes();
  return m.id() < all.size() ? all[m.id()]->name() : std::string_view("?");
}

std::vector<std::string> mode_names() {
  std::vector<std::string> names;
  for (const auto* m : detail::modes()) names.emplace_back(m->name());
  return names;
}

Mode parse_mode(std::string_view s) {
  const auto& all = detail::modes();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (s == all[i]->name()) return Mode(static_cast<std::uint8_t>(i));
  throw ConfigError("unknown mode \"" + std::string(s) + "\"; expected " +
                    detail::join_or(mode_names()));
}

std::string mode_help() {
  std::string s;
  for (const auto* m : detail::modes())
    s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", m->name(), m->summary());
  return s;
}

bool is_parallel(Mode m) { return detail::mode_def(m).parallel(); }

unsigned workers_used(Mode m, unsigned workers) {
  const auto& def = detail::mode_def(m);
  return def.parallel() || def.threaded() || def.simulated() ? workers : 1;
}

}  // namespace hogwild
