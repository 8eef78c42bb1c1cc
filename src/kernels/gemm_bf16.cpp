// The bf16 products (gemm_bf16.hpp). The loop nest is two levels: 32 x 32 blocks of
// C held in four tile registers (tmm0-3), and along K one 16 x 32 A tile per block
// row (tmm4-5) and one 16 x (16 pairs) B tile per block column (tmm6-7), four tile
// products per step. Edge blocks (16 rows or columns) use the first tiles only.
// The packing and the epilogue are AVX-512; everything is inside one target region
// (as src/kernels/dense_layer.cpp does), and nothing here runs unless available().
#include "kernels/gemm_bf16.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hogwild::kernels::bf16 {

std::uint16_t round(float x) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float widen(std::uint16_t b) noexcept {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

namespace {

std::string probe() {
  if (const char* off = std::getenv("HOGWILD_DISABLE_AMX"); off && *off && *off != '0')
    return "the AMX tile unit is disabled by HOGWILD_DISABLE_AMX";
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return "this CPU has no AMX-BF16 tile unit (CPUID leaf 7 missing)";
  const bool tile = d & (1u << 24), amx_bf16 = d & (1u << 22);
  if (!tile || !amx_bf16)
    return "this CPU has no AMX-BF16 tile unit (Intel Xeon Sapphire Rapids and later have one)";
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
    return "this CPU has no AVX-512BW/VL";
  constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM (asm/prctl.h)
  constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0)
    return std::string("the kernel does not grant the AMX tile state (arch_prctl: ") +
           std::strerror(errno) + "; Linux 5.16 or later grants it)";
  return {};
#else
  return "AMX tiles need an x86-64 CPU";
#endif
}

const std::string& reason() {
  static const std::string r = probe();
  return r;
}

}  // namespace

bool available() noexcept { return reason().empty(); }
std::string unavailable_reason() { return reason(); }

namespace {

// The scalar forms: any strides, any source (private ones only: see pack_a).
void pack_a_scalar(std::size_t m, std::size_t k, const float* src, std::ptrdiff_t rs,
                   std::ptrdiff_t cs, std::uint16_t* dst) {
  const std::size_t kp = pad(k, kDepth);
  for (std::size_t i = 0; i < m; ++i) {
    const float* s = src + static_cast<std::ptrdiff_t>(i) * rs;
    std::uint16_t* d = dst + i * kp;
    for (std::size_t p = 0; p < k; ++p) d[p] = round(s[static_cast<std::ptrdiff_t>(p) * cs]);
  }
}

void pack_b_scalar(std::size_t k, std::size_t n, const float* src, std::ptrdiff_t rs,
                   std::ptrdiff_t cs, std::uint16_t* dst) {
  const std::size_t np = pad(n, kRows);
  for (std::size_t p = 0; p < k; ++p) {
    const float* s = src + static_cast<std::ptrdiff_t>(p) * rs;
    std::uint16_t* d = dst + (p / 2) * np * 2 + p % 2;
    for (std::size_t j = 0; j < n; ++j) d[j * 2] = round(s[static_cast<std::ptrdiff_t>(j) * cs]);
  }
}

}  // namespace

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")
#endif
namespace {

inline __mmask16 first(std::size_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff)
                     : static_cast<__mmask16>((1u << count) - 1);
}

// The bf16 roundings of 16 floats, in the low halves of 16 32-bit lanes.
inline __m512i round_bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  // The maskz forms: GCC 12's unmasked shifts start from a self-initialised
  // _mm512_undefined, which -Wmaybe-uninitialized reports (GCC PR 105593).
  const __mmask16 all = 0xffff;
  const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(all, u, 16), _mm512_set1_epi32(1));
  return _mm512_maskz_srli_epi32(
      all, _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
}

// round_bits of the first count values at p (zeros after). Masked loads read each
// float whole; bytes are dense_u8 pixels, value byte / 255 (as the kernels widen them).
inline __m512i round16(const float* p, std::size_t count) {
  if (count == 0) return _mm512_setzero_si512();
  return round_bits(_mm512_maskz_loadu_ps(first(count), p));
}
inline __m512i round16(const std::uint8_t* p, std::size_t count) {
  if (count == 0) return _mm512_setzero_si512();
  const __m512i wide = _mm512_maskz_cvtepu8_epi32(0xffff, _mm_maskz_loadu_epi8(first(count), p));
  return round_bits(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, wide),
                                  _mm512_set1_ps(1.0f / 255.0f)));
}

// Lane l of the result holds l * stride: the offsets of a 16-lane scatter whose
// lanes land stride elements apart.
inline __m512i lane_offsets(std::size_t stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(stride)));
}

// The 32-bit words of the pair layout from two round_bits results: lo's bf16 in the
// low half (row p), hi's in the high half (row p + 1).
inline __m512i pair_words(__m512i lo, __m512i hi) {
  return _mm512_or_si512(lo, _mm512_maskz_slli_epi32(0xffff, hi, 16));
}

// Rows with unit column stride: 16 floats at a time.
void pack_a_rows(std::size_t m, std::size_t k, const float* src, std::ptrdiff_t rs,
                 std::uint16_t* dst) {
  const std::size_t kp = pad(k, kDepth);
  for (std::size_t i = 0; i < m; ++i) {
    const float* s = src + static_cast<std::ptrdiff_t>(i) * rs;
    std::uint16_t* d = dst + i * kp;
    for (std::size_t p = 0; p < kp; p += 16) {
      const __m512i w = round16(s + std::min(p, k), p < k ? k - p : 0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + p), _mm512_maskz_cvtepi32_epi16(0xffff, w));
    }
  }
}

// Pairs of rows (row(p): a pointer to row p's n values), interleaved: one 64-byte
// store per 16 columns.
template <class Row>
void pack_b_rows(std::size_t k, std::size_t n, Row row, std::uint16_t* dst) {
  const std::size_t np = pad(n, kRows), kp = pad(k, kDepth);
  for (std::size_t q = 0; q < kp / 2; ++q) {
    const std::size_t p = 2 * q;
    const auto* s0 = row(std::min(p, k - 1));
    const auto* s1 = row(std::min(p + 1, k - 1));
    std::uint16_t* d = dst + q * np * 2;
    for (std::size_t j = 0; j < np; j += 16) {
      const std::size_t count = n - j;  // j < np, so j < n
      const __m512i lo = p < k ? round16(s0 + j, count) : _mm512_setzero_si512();
      const __m512i hi = p + 1 < k ? round16(s1 + j, count) : _mm512_setzero_si512();
      _mm512_storeu_si512(d + j * 2, pair_words(lo, hi));
    }
  }
}

// Columns of contiguous values (column(j): a pointer to column j's k values):
// column j's pairs (p, p + 1) are adjacent; 32 of them rounded, narrowed and
// scattered to their 16 rows of the pair layout at once. Padding columns [n, np)
// are the caller's (zero).
template <class Column>
void pack_b_columns(std::size_t k, std::size_t n, Column column, std::uint16_t* dst) {
  const std::size_t np = pad(n, kRows), kp = pad(k, kDepth);
  auto* words = reinterpret_cast<std::int32_t*>(dst);
  const __m512i step = lane_offsets(np);
  // (_mm512_set_epi16 lists the last element first.)
  const __m512i evens = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36,
                                         34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8,
                                         6, 4, 2, 0);
  for (std::size_t j = 0; j < n; ++j) {
    const auto* col = column(j);
    for (std::size_t p = 0; p < kp; p += 32) {
      const __m512i lo = round16(col + std::min(p, k), p < k ? k - p : 0);
      const __m512i hi = round16(col + std::min(p + 16, k), p + 16 < k ? k - p - 16 : 0);
      // The bf16 halves of lo's and hi's lanes, in order: 32 values, 16 pairs.
      const __m512i pairs = _mm512_permutex2var_epi16(lo, evens, hi);
      _mm512_i32scatter_epi32(words + (p / 2) * np + j, step, pairs, 4);
    }
  }
}

// The transpose for A (src(i, p) = src[i + p * cs]): rows
// p and p + 1 of the source give the pairs of 16 rows of A, scattered as words.
void pack_a_columns(std::size_t m, std::size_t k, const float* src, std::ptrdiff_t cs,
                    std::uint16_t* dst) {
  const std::size_t kp = pad(k, kDepth);
  auto* words = reinterpret_cast<std::int32_t*>(dst);
  const __m512i step = lane_offsets(kp / 2);
  for (std::size_t i = 0; i < m; i += 16) {
    const std::size_t count = std::min<std::size_t>(16, m - i);
    for (std::size_t p = 0; p < kp; p += 2) {
      const __m512i lo =
          p < k ? round16(src + static_cast<std::ptrdiff_t>(p) * cs + i, count) : _mm512_setzero_si512();
      const __m512i hi = p + 1 < k ? round16(src + static_cast<std::ptrdiff_t>(p + 1) * cs + i, count)
                                   : _mm512_setzero_si512();
      _mm512_mask_i32scatter_epi32(words + i * (kp / 2) + p / 2, first(count), step,
                                   pair_words(lo, hi), 4);
    }
  }
}

// Row (or column) i of a strided float matrix, for the templates above.
inline auto strided(const float* src, std::ptrdiff_t stride) {
  return [=](std::size_t i) { return src + static_cast<std::ptrdiff_t>(i) * stride; };
}

struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// C rows [i, i + 16) x columns [j, j + 16), clipped to m x n, from a stored tile.
template <Epilogue E>
inline void epilogue(const float* tile, float* c, std::size_t ldc, std::size_t i, std::size_t j,
                     std::size_t m, std::size_t n, float alpha) {
  const __mmask16 mask = first(n - j);
  const std::size_t rows = std::min<std::size_t>(16, m - i);
  if constexpr (E == Epilogue::store_transposed) {
    // Row r of the tile is column i + r of C^T: 16 floats ldc apart.
    const __m512i down = lane_offsets(ldc);
    for (std::size_t r = 0; r < rows; ++r)
      _mm512_mask_i32scatter_ps(c + j * ldc + i + r, mask, down, _mm512_load_ps(tile + r * 16), 4);
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    float* out = c + (i + r) * ldc + j;
    const __m512 t = _mm512_load_ps(tile + r * 16);
    if constexpr (E == Epilogue::add_live)
      _mm512_mask_storeu_ps(out, mask,
                            _mm512_fmadd_ps(_mm512_set1_ps(alpha), t,
                                            _mm512_maskz_loadu_ps(mask, out)));
    else
      _mm512_mask_storeu_ps(out, mask, t);
  }
}

template <Epilogue E>
void gemm_tiles(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a,
                const std::uint16_t* b, float* c, std::size_t ldc, float alpha) {
  const std::size_t mp = pad(m, kRows), np = pad(n, kRows), kp = pad(k, kDepth);
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  _tile_loadconfig(&config);
  const std::size_t sa = kp * 2, sb = np * 4;  // bytes between tile rows
  alignas(64) float tile[4][256];
  for (std::size_t i = 0; i < mp; i += 32) {
    const bool two_i = i + 16 < mp;
    for (std::size_t j = 0; j < np; j += 32) {
      const bool two_j = j + 16 < np;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (std::size_t kk = 0; kk < kp; kk += 32) {
        const std::uint16_t* ak = a + i * kp + kk;
        const std::uint16_t* bk = b + (kk / 2) * np * 2 + j * 2;
        _tile_loadd(4, ak, sa);
        _tile_loadd(6, bk, sb);
        _tile_dpbf16ps(0, 4, 6);
        if (two_j) {
          _tile_loadd(7, bk + 32, sb);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (two_i) {
          _tile_loadd(5, ak + 16 * kp, sa);
          _tile_dpbf16ps(2, 5, 6);
          if (two_j) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, tile[0], 64);
      epilogue<E>(tile[0], c, ldc, i, j, m, n, alpha);
      if (two_j) {
        _tile_stored(1, tile[1], 64);
        epilogue<E>(tile[1], c, ldc, i, j + 16, m, n, alpha);
      }
      if (two_i) {
        _tile_stored(2, tile[2], 64);
        epilogue<E>(tile[2], c, ldc, i + 16, j, m, n, alpha);
        if (two_j) {
          _tile_stored(3, tile[3], 64);
          epilogue<E>(tile[3], c, ldc, i + 16, j + 16, m, n, alpha);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // __x86_64__

namespace {

// A buffer reused for operands of different sizes only ever grows: shrinking and
// growing back would zero the regrown part on every call.
void grow(Packed& p, std::size_t size) {
  if (p.size() < size) p.resize(size);
}

void require_available() {
  if (!available()) throw std::logic_error("bf16 products: " + unavailable_reason());
}

// The live forms: every race they take part in has one of these on its stack
// (tests/tsan.supp names them). Whole floats through masked vector loads and stores.
__attribute__((noinline)) void pack_live_a(std::size_t m, std::size_t k, const float* src,
                                           std::ptrdiff_t rs, std::uint16_t* dst) {
#if defined(__x86_64__)
  pack_a_rows(m, k, src, rs, dst);
#endif
}
__attribute__((noinline)) void pack_live_b(std::size_t k, std::size_t n, const float* src,
                                           std::ptrdiff_t rs, std::uint16_t* dst) {
#if defined(__x86_64__)
  pack_b_rows(k, n, strided(src, rs), dst);
#endif
}
__attribute__((noinline)) void gemm_bf16_on_live(std::size_t m, std::size_t n, std::size_t k,
                                                 const std::uint16_t* a, const std::uint16_t* b,
                                                 float* c, std::size_t ldc, float alpha) {
#if defined(__x86_64__)
  gemm_tiles<Epilogue::add_live>(m, n, k, a, b, c, ldc, alpha);
#endif
}

}  // namespace

void pack_a(std::size_t m, std::size_t k, const float* src, std::ptrdiff_t rs,
            std::ptrdiff_t cs, Packed& dst, bool live) {
  require_available();
  const std::size_t kp = pad(k, kDepth);
  if (live && cs != 1)
    throw std::invalid_argument("bf16::pack_a: a live source needs unit column stride");
  const std::size_t size = pad(m, kRows) * kp;
  grow(dst, size);
  // The rows path writes every column of rows [0, m); the padding rows are zero.
  std::fill(dst.begin() + static_cast<std::ptrdiff_t>(m * kp),
            dst.begin() + static_cast<std::ptrdiff_t>(size), std::uint16_t{0});
  if (m == 0 || k == 0) return;
  if (live) return pack_live_a(m, k, src, rs, dst.data());
#if defined(__x86_64__)
  if (cs == 1) return pack_a_rows(m, k, src, rs, dst.data());
  if (rs == 1) return pack_a_columns(m, k, src, cs, dst.data());
#endif
  std::fill(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(size), std::uint16_t{0});
  pack_a_scalar(m, k, src, rs, cs, dst.data());
}

void pack_b(std::size_t k, std::size_t n, const float* src, std::ptrdiff_t rs,
            std::ptrdiff_t cs, Packed& dst, bool live) {
  require_available();
  if (live && cs != 1)
    throw std::invalid_argument("bf16::pack_b: a live source needs unit column stride");
  const auto size = static_cast<std::ptrdiff_t>(pad(k, kDepth) * pad(n, kRows));
  grow(dst, static_cast<std::size_t>(size));
  const auto zero = [&] { std::fill(dst.begin(), dst.begin() + size, std::uint16_t{0}); };
  if (k == 0 || n == 0) return zero();
  // The rows path writes every element, padding included.
  if (live) return pack_live_b(k, n, src, rs, dst.data());
#if defined(__x86_64__)
  if (cs == 1) return pack_b_rows(k, n, strided(src, rs), dst.data());
  if (rs == 1) {
    if (n % kRows) zero();
    return pack_b_columns(k, n, strided(src, cs), dst.data());
  }
#endif
  zero();
  pack_b_scalar(k, n, src, rs, cs, dst.data());
}

void pack_b_byte_columns(std::size_t k, std::size_t n, const std::uint8_t* const* columns,
                         Packed& dst) {
  require_available();
  const std::size_t size = pad(k, kDepth) * pad(n, kRows);
  grow(dst, size);
  if (k == 0 || n % kRows) std::fill_n(dst.begin(), size, std::uint16_t{0});
#if defined(__x86_64__)
  if (k > 0) pack_b_columns(k, n, [=](std::size_t j) { return columns[j]; }, dst.data());
#endif
}

void pack_b_byte_rows(std::size_t k, std::size_t n, const std::uint8_t* const* rows, Packed& dst) {
  require_available();
  const std::size_t size = pad(k, kDepth) * pad(n, kRows);
  grow(dst, size);
  if (k == 0 || n == 0) {
    std::fill_n(dst.begin(), size, std::uint16_t{0});
    return;
  }
#if defined(__x86_64__)
  pack_b_rows(k, n, [=](std::size_t p) { return rows[p]; }, dst.data());
#endif
}

void gemm(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a,
          const std::uint16_t* b, float* c, std::size_t ldc, Epilogue epilogue, float alpha) {
  require_available();
  if (m == 0 || n == 0) return;
  if (epilogue == Epilogue::add_live) return gemm_bf16_on_live(m, n, k, a, b, c, ldc, alpha);
#if defined(__x86_64__)
  if (epilogue == Epilogue::store_transposed)
    return gemm_tiles<Epilogue::store_transposed>(m, n, k, a, b, c, ldc, alpha);
  gemm_tiles<Epilogue::store>(m, n, k, a, b, c, ldc, alpha);
#endif
}

}  // namespace hogwild::kernels::bf16
