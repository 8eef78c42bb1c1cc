#include "hogwild/update_policy.hpp"

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hogwild {

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

// Without contraction: dst[i] + round(a * x[i]), the rounding the gradient path
// reproduces (opaque() in update_policy.hpp). The loop is bound by memory, not by
// the separate multiply. (GCC takes it for the function, clang inside its body.)
#if !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
__attribute__((target_clones("arch=x86-64-v3", "default")))
void dense_axpy_shared(float* dst, float a, const float* x, std::size_t n) noexcept {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
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
#if !defined(__clang__)
#pragma GCC pop_options
#endif

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

#if defined(__x86_64__) && !defined(HOGWILD_ASAN) && !defined(HOGWILD_TSAN)
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
