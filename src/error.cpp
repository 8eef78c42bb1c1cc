#include "hogwild/error.hpp"

#include <cerrno>

namespace hogwild {

bool is_out_of_space(int err) noexcept { return err == ENOSPC || err == EFBIG || err == EDQUOT; }

std::string DataError::located(const std::string& file, std::size_t line, const std::string& what) {
  std::ostringstream os;
  os << file;
  if (line) os << ':' << line;
  os << ": " << what;
  return os.str();
}

}  // namespace hogwild

namespace hogwild::detail {

void enforce_fail(const char* cond, const char* file, int line, const std::string& detail) {
  std::ostringstream os;
  os << "internal check failed: " << cond << " (" << detail << ") at " << file << ":" << line;
  throw Error(os.str());
}

}  // namespace hogwild::detail
