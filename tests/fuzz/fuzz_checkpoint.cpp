// libFuzzer target: the checkpoint reader. The CRCs are checked first, so a second
// pass re-seals the input's checksums to let the fuzzer reach the payload parser.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "hogwild/checkpoint.hpp"
#include "hogwild/error.hpp"
#include "reseal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      hogwild::Checkpoint c = hogwild::parse_checkpoint(bytes, "fuzz.ckpt");
      // What parses must serialize back to the same bytes (a version 2 file, read
      // too, is written as the current version).
      std::uint32_t version = 0;
      std::memcpy(&version, bytes.data() + 8, 4);
      if (version == hogwild::kCheckpointVersion && hogwild::serialize_checkpoint(c) != bytes)
        __builtin_trap();
    } catch (const hogwild::Error&) {
    }
    if (bytes.size() < 4) break;
    hogwild::test::reseal_checkpoint(bytes);
  }
  return 0;
}
