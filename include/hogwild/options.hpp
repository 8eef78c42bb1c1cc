// The trainer's options, each declared once: its name (--name on the command line;
// the key of the summary's "options" and of a Python keyword, with '_' for '-'),
// the concern it belongs to, what it does, the values it takes, and whether a
// resumed run must match it. The command line, TrainConfig::validate, the
// description a fork-server worker is started from, a checkpoint's compatibility
// check and the summary all read these declarations (src/options/), so a new
// TrainConfig field is one declaration there, not five edits.
//
// Every value travels as the text the command line takes ("0.5", "256,128",
// "auto", "true" for a flag); "" is an option that was not given, where that
// differs from any value (--sync-every, --straggler, a mode's own option).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hogwild {

struct TrainConfig;

enum class Concern : std::uint8_t {
  model, optimiser, mode, nodes, device, instruments, outputs, process, library
};
const char* to_string(Concern c) noexcept;

struct OptionInfo {
  std::string name = {};  // "lr": --lr
  Concern concern = Concern::model;
  std::string help = {};
  std::string value_text = {};  // "N", "S", "fp32|bf16"; empty: a flag, given without a value
  std::string range = {};  // "1 to 1024", for --help and the docs; empty: any
  std::string mode = {};   // "ps": an option of that mode only, refused under another
  bool resume_must_match = false;  // a checkpoint written with another value is refused
  // Several nodes: every node must be given the same value (a node that differs is
  // refused at the join, naming the option). Implied by resume_must_match.
  bool nodes_must_match = false;
  bool command_line = true;  // false: a library setting (the CLI chooses it itself)
  // The value in a config, as text.
  std::function<std::string(const TrainConfig&)> get = {};
  // Sets it from text; a value out of range or malformed is a ConfigError that
  // starts with "--name".
  std::function<void(TrainConfig&, const std::string&)> set = {};
};

// Every option: the trainer's, then the ones the modes declare (a mode's
// ModeOption; its mode field names the modes that take it).
const std::vector<OptionInfo>& train_options();
const OptionInfo* find_option(std::string_view name);  // null if none is called so

// By name; ConfigError for a name no option has, or a bad value.
void set_option(TrainConfig& config, std::string_view name, const std::string& value);
std::string option_value(const TrainConfig& config, std::string_view name);

}  // namespace hogwild
