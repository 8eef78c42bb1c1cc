// libFuzzer target: the binary cache validator (what open_cache checks before a
// cache is trusted in place).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    hogwild::Dataset d = hogwild::parse_cache({reinterpret_cast<const char*>(data), size}, "fuzz.cache");
    // A cache that passes is used in place: touch every row as a model would.
    double sum = 0;
    for (std::size_t r = 0; r < d.rows(); ++r) {
      const auto row = d.row(r);
      for (std::uint32_t k = 0; k < row.nnz; ++k) sum += row.at(k) * (row.index ? row.index[k] : 1);
    }
    volatile double sink = sum;
    (void)sink;
  } catch (const hogwild::Error&) {
  }
  return 0;
}
