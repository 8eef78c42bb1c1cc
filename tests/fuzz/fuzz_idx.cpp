// libFuzzer target: the MNIST IDX reader. The first byte says where the input is
// split into an images file and a labels file (as a fraction of the rest).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t split = rest.size() * data[0] / 255;
  try {
    hogwild::parse_idx(rest.substr(0, split), rest.substr(split), "fuzz.idx");
  } catch (const hogwild::Error&) {
  }
  return 0;
}
