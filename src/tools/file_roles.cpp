#include "file_roles.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <system_error>

#include "hogwild/error.hpp"

namespace hogwild::tools {

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  if (a.empty() || b.empty() || a == "-" || b == "-") return false;
  std::error_code ea, eb;
  const auto sa = fs::status(a, ea), sb = fs::status(b, eb);
  if (fs::exists(sa) || fs::exists(sb)) {
    if (!fs::is_regular_file(sa) || !fs::is_regular_file(sb)) return false;
    std::error_code e;
    return fs::equivalent(a, b, e) && !e;
  }
  std::error_code ca, cb;
  const auto pa = fs::weakly_canonical(fs::absolute(a), ca);
  const auto pb = fs::weakly_canonical(fs::absolute(b), cb);
  return !ca && !cb && pa == pb;
}

void check_outputs(const std::vector<FileRole>& inputs, const std::vector<FileRole>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const FileRole& out = outputs[i];
    if (out.path.empty()) continue;
    for (const FileRole& in : inputs)
      if (in.option != out.may_replace && same_file(out.path, in.path))
        throw ConfigError(fmt::format(
            "{} {} is the {} file: writing it would overwrite that input; give {} another path",
            out.option, out.path, in.option, out.option));
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(out.path, outputs[j].path))
        throw ConfigError(fmt::format("{} {} is also the {} file: give each output its own path",
                                      out.option, out.path, outputs[j].option));
  }
}

}  // namespace hogwild::tools
