// Where the arrays of a Dataset sit inside one buffer. The in-memory datasets and
// the binary cache share this layout, so a cache section can be used in place:
// labels, CSR offsets, CSR indices, values, each starting on a 64-byte boundary
// (a cache line, and enough for any SIMD load the models may do). The values are
// floats, or bytes for Layout::dense_u8.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hogwild/dataset.hpp"

namespace hogwild::detail {

inline constexpr std::size_t kSectionAlign = 64;

constexpr std::size_t align_up(std::size_t n, std::size_t a = kSectionAlign) noexcept {
  return (n + a - 1) / a * a;
}

// Sparse and ratings rows are CSR (offsets and indices arrays); dense and dense_u8
// rows are not.
constexpr bool is_csr(Layout layout) noexcept {
  return layout == Layout::sparse || layout == Layout::ratings;
}

// Bytes of one entry of the values array.
constexpr std::size_t value_size(Layout layout) noexcept {
  return layout == Layout::dense_u8 ? sizeof(std::uint8_t) : sizeof(float);
}

// Byte offsets of each array from the start of the buffer; `end` is the total size.
// Dense datasets have empty offsets and indices sections (size 0, offset = the next
// section's start), so every offset is meaningful and 64-byte aligned.
struct Sections {
  std::size_t labels = 0, offsets = 0, indices = 0, values = 0, end = 0;
};

// `values` is the number of entries of the values array (floats, or bytes for
// dense_u8): nnz for CSR, rows*cols for dense. The caller has checked that the sizes
// do not overflow.
inline Sections make_sections(Layout layout, std::size_t base, std::size_t rows,
                              std::size_t values) noexcept {
  Sections s;
  s.labels = align_up(base);
  s.offsets = align_up(s.labels + rows * sizeof(float));
  if (is_csr(layout)) {
    s.indices = align_up(s.offsets + (rows + 1) * sizeof(std::uint64_t));
    s.values = align_up(s.indices + values * sizeof(std::uint32_t));
  } else {
    s.indices = s.offsets;
    s.values = s.offsets;
  }
  s.end = s.values + values * value_size(layout);
  return s;
}

template <class T>
T* section(std::byte* base, std::size_t offset) noexcept {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace hogwild::detail
