// Re-seals a checkpoint's checksums after its bytes were changed on purpose (a test
// of the parser behind them, a fuzzer's mutation): in a version 3 file each section
// whose length fits what is left (its CRC-32 covers its length and bytes), then the
// file's own CRC-32 at the end. What does not fit is left for the parser to refuse.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace hogwild::test {

inline std::uint32_t crc_of_bytes(const char* p, std::size_t n) {
  return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

inline void reseal_checkpoint(std::string& b) {
  constexpr std::size_t kHeader = 24;
  if (b.size() < kHeader + 4) return;
  std::uint32_t version = 0;
  std::memcpy(&version, b.data() + 8, 4);
  if (version == 3) {
    std::size_t at = kHeader;
    const std::size_t end = b.size() - 4;
    while (end - at >= 12) {
      std::uint64_t length = 0;
      std::memcpy(&length, b.data() + at, 8);
      if (length > end - at - 12) break;
      const std::uint32_t sum = crc_of_bytes(b.data() + at, 8 + length);
      std::memcpy(b.data() + at + 8 + length, &sum, 4);
      at += 12 + length;
    }
  }
  const std::uint32_t sum = crc_of_bytes(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &sum, 4);
}

}  // namespace hogwild::test
