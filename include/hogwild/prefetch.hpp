// Software prefetches for rows visited in shuffled order (the step loop's, and a
// model's inside its batch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hogwild/dataset.hpp"

namespace hogwild {

// Starts loading row r while the current example computes: workers visit their
// rows in shuffled order, so every row is a cache miss no hardware prefetcher can
// predict. For a sparse row the first 16 non-zeros (index and value) are asked
// for, and the adjacent-line and stream prefetchers follow the rest; a dense row
// (an image: 784 floats, 49 lines; as bytes, 13) is asked for whole, up to 8 KiB: waiting for its
// lines was 70 % of softmax's forward pass.
// prefetcht0 as volatile asm on x86-64: GCC 12 deleted every __builtin_prefetch
// here once inlined (the library's binary had no prefetch instruction at all).
inline void prefetch(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}
// Row r's entry of a sparse or ratings dataset's offsets (500k rows: 4 MB, visited
// in shuffled order): prefetch_row reads it to find the row, so it is asked for one
// batch before that.
inline void prefetch_offsets(const Dataset& d, std::uint32_t r) noexcept {
  const auto off = d.offsets();
  if (!off.empty()) prefetch(off.data() + r);
}
inline void prefetch_row(const Dataset& d, std::uint32_t r) noexcept {
  const RowView x = d.row(r);
  if (x.index) {
    prefetch(x.index);
    prefetch(x.value);
    return;
  }
  const char* p = x.bytes ? reinterpret_cast<const char*>(x.bytes)
                          : reinterpret_cast<const char*>(x.value);
  const std::size_t bytes = std::min<std::size_t>(x.nnz * (x.bytes ? 1 : sizeof(float)), 8192);
  for (std::size_t o = 0; o < bytes; o += 64) prefetch(p + o);
}

}  // namespace hogwild
