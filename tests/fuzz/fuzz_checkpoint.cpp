// libFuzzer target: the checkpoint reader. The CRC is checked first, so a second
// pass re-seals the input's checksum to let the fuzzer reach the payload parser.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "hogwild/checkpoint.hpp"
#include "hogwild/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      hogwild::Checkpoint c = hogwild::parse_checkpoint(bytes, "fuzz.ckpt");
      // What parses must serialize back to the same bytes.
      if (hogwild::serialize_checkpoint(c) != bytes) __builtin_trap();
    } catch (const hogwild::Error&) {
    }
    if (bytes.size() < 4) break;
    const auto n = static_cast<uInt>(bytes.size() - 4);
    const auto sum = static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), n));
    std::memcpy(bytes.data() + n, &sum, 4);
  }
  return 0;
}
