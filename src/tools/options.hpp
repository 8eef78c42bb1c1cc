// Option checks the tools share (CLI11).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace hogwild::tools {

// Every unsigned option of `app` and of its subcommands takes a whole number of 0 or
// more, written in digits: CLI11 wrapped "-1" to 2^64 - 1 (--batch -1, --seed -1
// trained as if given 18446744073709551615). Call it once every option is added.
inline void refuse_negative_counts(CLI::App& app) {
  const CLI::Validator digits(
      [](std::string& s) -> std::string {
        if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return {};
        return "expected a whole number of 0 or more, got " + s;
      },
      "N >= 0");
  for (CLI::Option* o : app.get_options())
    if (o->get_type_name() == "UINT") o->check(digits);
  for (CLI::App* sub : app.get_subcommands({})) refuse_negative_counts(*sub);
}

// --threads: 0 (all cores) to kMaxParserThreads (TBB crashed on 100000).
inline constexpr unsigned kMaxParserThreads = 1024;
inline CLI::Validator parser_threads() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.size() <= 5 && !s.empty() && s.find_first_not_of("0123456789") == std::string::npos &&
            std::stoul(s) <= kMaxParserThreads)
          return {};
        return "expected 0 (all cores) to " + std::to_string(kMaxParserThreads) + ", got " + s;
      },
      "0 to 1024");
}

}  // namespace hogwild::tools
