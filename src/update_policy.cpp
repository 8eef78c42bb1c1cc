#include "hogwild/update_policy.hpp"

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hogwild/error.hpp"

namespace hogwild {

std::string_view to_string(Mode m) noexcept {
  switch (m) {
    case Mode::serial: return "serial";
    case Mode::hogwild: return "hogwild";
    case Mode::atomic: return "atomic";
    case Mode::lock: return "lock";
  }
  return "?";
}

Mode parse_mode(std::string_view s) {
  for (Mode m : {Mode::serial, Mode::hogwild, Mode::atomic, Mode::lock})
    if (s == to_string(m)) return m;
  throw ConfigError("unknown mode \"" + std::string(s) +
                    "\"; expected serial, hogwild, atomic or lock");
}

namespace detail {

// The dense half of THE INTENDED RACE (update_policy.hpp): whole-lane vector loads
// and stores on the shared mapping. Kept out of line so tests/tsan.supp can name
// them. Each is compiled twice (target_clones, chosen once at load time by the CPU
// it runs on): for x86-64-v3 (AVX2: v8f is one 32-byte register) and for the
// baseline (SSE2: each v8f operation becomes two 16-byte ones). Either way every
// float is loaded and stored whole; four independent accumulators keep the dot
// product from waiting on one addition chain. SerialUpdate calls the same kernels
// on private memory, where there is no race.
// v8f values are passed by reference only, so that no 32-byte vector crosses a call
// by value (GCC notes the AVX/non-AVX ABI difference for such parameters).
namespace {
using v8f = float __attribute__((vector_size(32)));
inline void vload8(v8f& v, const float* p) noexcept { std::memcpy(&v, p, sizeof v); }
inline void vstore8(float* p, const v8f& v) noexcept { std::memcpy(p, &v, sizeof v); }
// The scalar tails: std::atomic_ref, not relaxed_load/store, whose asm `movss` is a
// legacy-SSE instruction: inside the AVX2 clone it would merge into a register with
// dirty upper lanes (a false dependency on every tail element; MF's 10-float rows
// ran 2x slower than under atomic mode).
inline float tail_load(const float* p) noexcept {
  return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed);
}
inline void tail_store(float* p, float v) noexcept {
  std::atomic_ref<float>(*p).store(v, std::memory_order_relaxed);
}
}  // namespace

__attribute__((target_clones("arch=x86-64-v3", "default")))
void dense_axpy_shared(float* dst, float a, const float* x, std::size_t n) noexcept {
  std::size_t i = 0;
  const v8f va = {a, a, a, a, a, a, a, a};
  v8f d0, d1, x0, x1;
  for (; i + 16 <= n; i += 16) {
    vload8(d0, dst + i);
    vload8(d1, dst + i + 8);
    vload8(x0, x + i);
    vload8(x1, x + i + 8);
    vstore8(dst + i, d0 + va * x0);
    vstore8(dst + i + 8, d1 + va * x1);
  }
  for (; i + 4 <= n; i += 4) vstore(dst + i, vload(dst + i) + v4f{a, a, a, a} * vload(x + i));
  for (; i < n; ++i) tail_store(dst + i, tail_load(dst + i) + a * x[i]);
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
float dense_dot_shared(const float* w, const float* x, std::size_t n) noexcept {
  std::size_t i = 0;
  v8f s[4] = {}, a, b;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      vload8(a, w + i + 8 * k);
      vload8(b, x + i + 8 * k);
      s[k] += a * b;
    }
  }
  for (; i + 8 <= n; i += 8) {
    vload8(a, w + i);
    vload8(b, x + i);
    s[0] += a * b;
  }
  const v8f t = (s[0] + s[1]) + (s[2] + s[3]);
  float r = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
  for (; i < n; ++i) r += tail_load(w + i) * x[i];
  return r;
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
void dense_merge_shared(float* shared, float* copy, float* base, std::size_t n) noexcept {
  std::size_t i = 0;
  v8f c, b, sv;
  for (; i + 8 <= n; i += 8) {
    vload8(c, copy + i);
    vload8(b, base + i);
    const v8f d = c - b;
    vload8(sv, shared + i);
    const auto changed = d != v8f{};
    bool any = false;
    for (int k = 0; k < 8; ++k) any |= changed[k] != 0;
    if (any) {
      sv += d;
      vstore8(shared + i, sv);
    }
    vstore8(copy + i, sv);
    vstore8(base + i, sv);
  }
  for (; i < n; ++i) {
    const float d = copy[i] - base[i];
    float v = tail_load(shared + i);
    if (d != 0) tail_store(shared + i, v += d);
    copy[i] = base[i] = v;
  }
}

// Blocks of R weight rows: R accumulators (R independent FMA chains), x's lane
// loaded once per block.
template <int R>
[[gnu::always_inline]] inline void multi_dot_block(const float* W, std::size_t ld,
                                                   const float* x, std::size_t n,
                                                   float* out) noexcept {
  v8f acc[R] = {}, xv, wv;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    vload8(xv, x + i);
    for (int r = 0; r < R; ++r) {
      vload8(wv, W + r * ld + i);
      acc[r] += wv * xv;
    }
  }
  for (int r = 0; r < R; ++r) {
    const v8f& t = acc[r];
    float s = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (std::size_t j = i; j < n; ++j) s += tail_load(W + r * ld + j) * x[j];
    out[r] = s;
  }
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
void dense_multi_dot_shared(const float* W, std::size_t ld, std::size_t rows, const float* x,
                            std::size_t n, float* out) noexcept {
  std::size_t r = 0;
  for (; r + 8 <= rows; r += 8) multi_dot_block<8>(W + r * ld, ld, x, n, out + r);
  if (r + 4 <= rows) multi_dot_block<4>(W + r * ld, ld, x, n, out + r), r += 4;
  if (r + 2 <= rows) multi_dot_block<2>(W + r * ld, ld, x, n, out + r), r += 2;
  if (r < rows) multi_dot_block<1>(W + r * ld, ld, x, n, out + r);
}

// A register tile of R rows x 16 columns of W (2R accumulators) stays in registers
// while every example of the batch goes by: per example two lanes of x and R
// broadcast coefficients feed 2R FMAs (0.67 loads per FMA at R = 6, against 1.1
// for one 8-lane strip). R = 6 keeps the tile, x and a broadcast in AVX2's 16
// registers. Strips of 8 and single columns finish the row.
template <int R>
[[gnu::always_inline]] inline void outer_update_block(float* W, std::size_t ld,
                                                      const float* coeff, std::size_t cs,
                                                      const float* const* xs,
                                                      std::size_t count,
                                                      std::size_t n) noexcept {
  std::size_t i = 0;
  v8f acc[R][2], x0, x1;
  for (; i + 16 <= n; i += 16) {
    for (int r = 0; r < R; ++r) {
      vload8(acc[r][0], W + r * ld + i);
      vload8(acc[r][1], W + r * ld + i + 8);
    }
    for (std::size_t b = 0; b < count; ++b) {
      vload8(x0, xs[b] + i);
      vload8(x1, xs[b] + i + 8);
      const float* c = coeff + b * cs;
      for (int r = 0; r < R; ++r) {
        acc[r][0] += c[r] * x0;
        acc[r][1] += c[r] * x1;
      }
    }
    for (int r = 0; r < R; ++r) {
      vstore8(W + r * ld + i, acc[r][0]);
      vstore8(W + r * ld + i + 8, acc[r][1]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    for (int r = 0; r < R; ++r) vload8(acc[r][0], W + r * ld + i);
    for (std::size_t b = 0; b < count; ++b) {
      vload8(x0, xs[b] + i);
      const float* c = coeff + b * cs;
      for (int r = 0; r < R; ++r) acc[r][0] += c[r] * x0;
    }
    for (int r = 0; r < R; ++r) vstore8(W + r * ld + i, acc[r][0]);
  }
  for (; i < n; ++i)
    for (int r = 0; r < R; ++r) {
      float s = 0;
      for (std::size_t b = 0; b < count; ++b) s += coeff[b * cs + r] * xs[b][i];
      tail_store(W + r * ld + i, tail_load(W + r * ld + i) + s);
    }
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
void dense_outer_update_shared(float* W, std::size_t ld, std::size_t rows, const float* coeff,
                               std::size_t cs, const float* const* xs, std::size_t count,
                               std::size_t n) noexcept {
  std::size_t r = 0;
  for (; r + 6 <= rows; r += 6) outer_update_block<6>(W + r * ld, ld, coeff + r, cs, xs, count, n);
  if (r + 4 <= rows)
    outer_update_block<4>(W + r * ld, ld, coeff + r, cs, xs, count, n), r += 4;
  if (r + 2 <= rows)
    outer_update_block<2>(W + r * ld, ld, coeff + r, cs, xs, count, n), r += 2;
  if (r < rows) outer_update_block<1>(W + r * ld, ld, coeff + r, cs, xs, count, n);
}

// The sparse margin. Indices are unsigned 32-bit, so the gathers widen them to 64
// bits (a 32-bit gather index is signed). Each gather lane is one aligned 4-byte
// load: the access relaxed_load makes, four at once. Scalar tails use VEX loads
// (_mm_load_ss), for the reason tail_load above gives.
namespace {
float sparse_dot_scalar(const float* w, const std::uint32_t* index, const float* value,
                        std::uint32_t nnz) noexcept {
  float s0 = 0, s1 = 0;
  std::uint32_t k = 0;
  for (; k + 2 <= nnz; k += 2) {
    s0 += relaxed_load(w + index[k]) * value[k];
    s1 += relaxed_load(w + index[k + 1]) * value[k + 1];
  }
  if (k < nnz) s0 += relaxed_load(w + index[k]) * value[k];
  return s0 + s1;
}

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define HOGWILD_GATHER 1
__attribute__((target("avx2,fma"))) float sparse_dot_avx2(const float* w,
                                                          const std::uint32_t* index,
                                                          const float* value,
                                                          std::uint32_t nnz) noexcept {
  __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
  std::uint32_t k = 0;
  for (; k + 8 <= nnz; k += 8) {
    const __m256i i0 = _mm256_cvtepu32_epi64(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(index + k)));
    const __m256i i1 = _mm256_cvtepu32_epi64(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(index + k + 4)));
    s0 = _mm_fmadd_ps(_mm256_i64gather_ps(w, i0, 4), _mm_loadu_ps(value + k), s0);
    s1 = _mm_fmadd_ps(_mm256_i64gather_ps(w, i1, 4), _mm_loadu_ps(value + k + 4), s1);
  }
  __m128 s = _mm_add_ps(s0, s1);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  for (; k < nnz; ++k) s = _mm_fmadd_ss(_mm_load_ss(w + index[k]), _mm_load_ss(value + k), s);
  return _mm_cvtss_f32(s);
}

#endif

using SparseDot = float (*)(const float*, const std::uint32_t*, const float*,
                            std::uint32_t) noexcept;

SparseDot pick_sparse_dot() noexcept {
#ifdef HOGWILD_GATHER
  // (An AVX-512 form with 8-lane gathers measured no faster than this one.)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return sparse_dot_avx2;
#endif
  return sparse_dot_scalar;
}

const SparseDot sparse_dot_impl = pick_sparse_dot();
}  // namespace

float sparse_dot_shared(const float* w, const std::uint32_t* index, const float* value,
                        std::uint32_t nnz) noexcept {
  return sparse_dot_impl(w, index, value, nnz);
}

}  // namespace detail
}  // namespace hogwild
