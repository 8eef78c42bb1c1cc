// The dense layer's two kernels (softmax's forward pass and the batch's
// outer-product update, update_policy.hpp), for float rows and for byte rows
// (Layout::dense_u8). The templates in dense_layer.inc are compiled three times, each
// inside a `#pragma GCC target` region: AVX-512 (16 lanes, 32 registers: a
// 10-class layer is one register tile), AVX2+FMA (8 lanes) and baseline x86-64
// (SSE2, 4 lanes). The byte loads need intrinsics, which
// only a region of their own instruction set may inline; hence regions rather than
// target attributes on wrappers or target_clones. (Clang, which builds
// the fuzzers, spells a region `#pragma clang attribute`.) The public functions
// dispatch on kernels::best_isa(), a plain switch: no IFUNC, whose resolver runs
// before ThreadSanitizer's runtime is ready (update_policy.cpp).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hogwild/dataset.hpp"
#include "hogwild/update_policy.hpp"
#include "kernels/dense_layer.hpp"

namespace hogwild::detail {

namespace {

// Vector types must not depend on a template parameter: GCC 12 drops vector_size
// from a dependent alias and silently yields a plain float.
using v4f = float __attribute__((vector_size(16)));
using v8f = float __attribute__((vector_size(32)));
using v16f = float __attribute__((vector_size(64)));

inline float tail_load(const float* p) noexcept {
  return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed);
}
inline void tail_store(float* p, float v) noexcept {
  std::atomic_ref<float>(*p).store(v, std::memory_order_relaxed);
}

constexpr float kByteScale = 1.0f / 255.0f;

}  // namespace

#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif  // what kernels::supported(avx512) checks
namespace avx512 {
namespace {
using V = v16f;
constexpr int kLanes = 16;
constexpr int kDotTile = 16;    // 16 accumulators + x + a row of W
constexpr int kOuterTile = 12;  // 24 accumulators + 2 x + a broadcast, of 32 registers
inline void load(V& v, const float* p) noexcept { std::memcpy(&v, p, sizeof v); }
inline void store(float* p, const V& v) noexcept { std::memcpy(p, &v, sizeof v); }
// The maskz forms: GCC 12's unmasked ones start from a self-initialised
// _mm512_undefined, which -Wmaybe-uninitialized reports (GCC PR 105593).
inline void load(V& v, const std::uint8_t* p) noexcept {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m512 f = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepu8_epi32(0xffff, b));
  v = reinterpret_cast<const V&>(f) * kByteScale;
}
#include "kernels/dense_layer.inc"
}  // namespace
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
namespace {
using V = v8f;
constexpr int kLanes = 8;
constexpr int kDotTile = 8;    // 8 accumulators + x + a row of W, of 16 registers
constexpr int kOuterTile = 6;  // 12 accumulators + 2 x + a broadcast
inline void load(V& v, const float* p) noexcept { std::memcpy(&v, p, sizeof v); }
inline void store(float* p, const V& v) noexcept { std::memcpy(p, &v, sizeof v); }
inline void load(V& v, const std::uint8_t* p) noexcept {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  v = reinterpret_cast<const V&>(f) * kByteScale;
}
#include "kernels/dense_layer.inc"
}  // namespace
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // __x86_64__

namespace baseline {
namespace {
using V = v4f;
constexpr int kLanes = 4;
constexpr int kDotTile = 8;    // 8 accumulators + x + a row of W, of 16 xmm registers
constexpr int kOuterTile = 6;  // 12 accumulators + 2 x + a broadcast
inline void load(V& v, const float* p) noexcept { std::memcpy(&v, p, sizeof v); }
inline void store(float* p, const V& v) noexcept { std::memcpy(p, &v, sizeof v); }
inline void load(V& v, const std::uint8_t* p) noexcept {
#if defined(__x86_64__)  // SSE2: bytes -> 16-bit -> 32-bit lanes
  std::int32_t word;
  std::memcpy(&word, p, sizeof word);
  const __m128i zero = _mm_setzero_si128();
  const __m128i w = _mm_unpacklo_epi8(_mm_cvtsi32_si128(word), zero);
  const __m128 f = _mm_cvtepi32_ps(_mm_unpacklo_epi16(w, zero));
  std::memcpy(&v, &f, sizeof v);
  v *= kByteScale;
#else
  for (int k = 0; k < kLanes; ++k) v[k] = static_cast<float>(p[k]) * kByteScale;
#endif
}
#include "kernels/dense_layer.inc"
}  // namespace
}  // namespace baseline

}  // namespace hogwild::detail

namespace hogwild::kernels {

std::string_view to_string(Isa isa) noexcept {
  switch (isa) {
    case Isa::generic: return "x86-64 SSE2";
    case Isa::avx2: return "AVX2+FMA";
    case Isa::avx512: return "AVX-512F";
  }
  return "?";
}

bool supported(Isa isa) noexcept {
  switch (isa) {
    case Isa::generic: return true;
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
}

Isa best_isa() noexcept {
  static const Isa best = supported(Isa::avx512) ? Isa::avx512
                          : supported(Isa::avx2) ? Isa::avx2
                                                 : Isa::generic;
  return best;
}

namespace {

template <class T>
void multi_dot_on(Isa isa, const float* W, std::size_t ld, std::size_t rows, const T* x,
                  std::size_t n, float* out) noexcept {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::avx512: return detail::avx512::multi_dot(W, ld, rows, x, n, out);
    case Isa::avx2: return detail::avx2::multi_dot(W, ld, rows, x, n, out);
    case Isa::generic: break;
  }
#endif
  (void)isa;
  detail::baseline::multi_dot(W, ld, rows, x, n, out);
}

template <class T>
void outer_update_on(Isa isa, float* W, std::size_t ld, std::size_t rows, const float* coeff,
                     std::size_t cs, const T* const* xs, std::size_t count,
                     std::size_t n) noexcept {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::avx512: return detail::avx512::outer_update(W, ld, rows, coeff, cs, xs, count, n);
    case Isa::avx2: return detail::avx2::outer_update(W, ld, rows, coeff, cs, xs, count, n);
    case Isa::generic: break;
  }
#endif
  (void)isa;
  detail::baseline::outer_update(W, ld, rows, coeff, cs, xs, count, n);
}

}  // namespace

void widen_bytes(Isa isa, float* dst, const std::uint8_t* src, std::size_t n) noexcept {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::avx512: return detail::avx512::widen(dst, src, n);
    case Isa::avx2: return detail::avx2::widen(dst, src, n);
    case Isa::generic: break;
  }
#endif
  (void)isa;
  detail::baseline::widen(dst, src, n);
}
void widen_bytes(float* dst, const std::uint8_t* src, std::size_t n) noexcept {
  widen_bytes(best_isa(), dst, src, n);
}

void multi_dot(Isa isa, const float* W, std::size_t ld, std::size_t rows, const float* x,
               std::size_t n, float* out) noexcept {
  multi_dot_on(isa, W, ld, rows, x, n, out);
}
void multi_dot(Isa isa, const float* W, std::size_t ld, std::size_t rows, const std::uint8_t* x,
               std::size_t n, float* out) noexcept {
  multi_dot_on(isa, W, ld, rows, x, n, out);
}
void outer_update(Isa isa, float* W, std::size_t ld, std::size_t rows, const float* coeff,
                  std::size_t cs, const float* const* xs, std::size_t count,
                  std::size_t n) noexcept {
  outer_update_on(isa, W, ld, rows, coeff, cs, xs, count, n);
}
void outer_update(Isa isa, float* W, std::size_t ld, std::size_t rows, const float* coeff,
                  std::size_t cs, const std::uint8_t* const* xs, std::size_t count,
                  std::size_t n) noexcept {
  outer_update_on(isa, W, ld, rows, coeff, cs, xs, count, n);
}

}  // namespace hogwild::kernels

namespace hogwild::detail {

void dense_multi_dot_shared(const float* W, std::size_t ld, std::size_t rows, const float* x,
                            std::size_t n, float* out) noexcept {
  kernels::multi_dot(kernels::best_isa(), W, ld, rows, x, n, out);
}
void dense_multi_dot_shared(const float* W, std::size_t ld, std::size_t rows,
                            const std::uint8_t* x, std::size_t n, float* out) noexcept {
  kernels::multi_dot(kernels::best_isa(), W, ld, rows, x, n, out);
}
void dense_outer_update_shared(float* W, std::size_t ld, std::size_t rows, const float* coeff,
                               std::size_t cs, const float* const* xs, std::size_t count,
                               std::size_t n) noexcept {
  kernels::outer_update(kernels::best_isa(), W, ld, rows, coeff, cs, xs, count, n);
}
void dense_outer_update_shared(float* W, std::size_t ld, std::size_t rows, const float* coeff,
                               std::size_t cs, const std::uint8_t* const* xs,
                               std::size_t count, std::size_t n) noexcept {
  kernels::outer_update(kernels::best_isa(), W, ld, rows, coeff, cs, xs, count, n);
}

}  // namespace hogwild::detail
