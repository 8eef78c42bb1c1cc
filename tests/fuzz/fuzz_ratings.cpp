// libFuzzer target: the ratings reader (u.data, ratings.csv, ratings.dat) on
// arbitrary bytes. Any input either parses or throws hogwild::Error; a crash, leak,
// hang or huge allocation is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto d = hogwild::parse_ratings({reinterpret_cast<const char*>(data), size}, "fuzz.data");
    // A parsed set must be self-consistent: two entries (user, item) per row.
    for (std::size_t r = 0; r < d.rows(); ++r)
      if (d.row(r).nnz != 2) __builtin_trap();
  } catch (const hogwild::Error&) {
  }
  return 0;
}
