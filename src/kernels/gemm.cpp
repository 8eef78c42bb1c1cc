// The loop nest (after BLIS, Van Zee and van de Geijn 2015), for the shapes of
// mini-batch training, where one dimension is the batch (tens of rows):
//   for each block of KC rows of B:
//     for each panel of NR columns of B: pack it (KC x NR, contiguous, zero-padded)
//       for each MR rows of A: micro-kernel, an MR x NR tile of C in registers
// A is read in place through its strides (one broadcast per element and k), so a
// transposed weight matrix costs no copy; only the B panel is packed. The same
// templated source is compiled three times, each inside a function carrying its own
// target attribute (GCC inlines the always_inline templates into it with that
// instruction set), and gemm() dispatches once on __builtin_cpu_supports.
#include "kernels/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "hogwild/update_policy.hpp"

namespace hogwild::kernels {

namespace {

constexpr std::size_t kKc = 256;  // rows of B per packed block (a KC x NR panel fits L1)
// With a live A its tile's copy shares L1 with the panel: a shorter block measured
// faster there (bench_gemm "fwd live", AVX-512: 115 -> 120 GFLOP/s).
constexpr std::size_t kKcLive = 128;

// Vector types must not depend on a template parameter: GCC 12 drops vector_size
// from a dependent alias and silently yields a plain float.
using v4f = float __attribute__((vector_size(16)));
using v8f = float __attribute__((vector_size(32)));
using v16f = float __attribute__((vector_size(64)));

template <class Vec, int Rows, int Vectors>
struct Shape {
  using vec = Vec;
  static constexpr int width = sizeof(Vec) / sizeof(float);  // floats per vector
  static constexpr int mr = Rows;                             // rows of the register tile
  static constexpr int nv = Vectors;                          // vectors per row of the tile
  static constexpr std::size_t nr = static_cast<std::size_t>(width * Vectors);
};
// Register budgets: 16 zmm accumulators of 32; 12 ymm of 16; 8 xmm of 16.
using Avx512Shape = Shape<v16f, 8, 2>;
using Avx2Shape = Shape<v8f, 6, 2>;
using GenericShape = Shape<v4f, 4, 2>;

// Unaligned vector access (by reference: a vector by value would change the ABI
// of these default-target helpers).
template <class V>
[[gnu::always_inline]] inline void load(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// Scalar accesses to a live tensor: relaxed std::atomic_ref, whole floats.
inline float load_live(const float* p) {
  return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed);
}
inline void store_live(float* p, float v) {
  std::atomic_ref<float>(*p).store(v, std::memory_order_relaxed);
}

// C[0..M) x [0..nr) (=, or += unless overwrite) A-rows · packed panel, over kc.
template <class S, int M, bool LiveC>
[[gnu::always_inline]] inline void micro(std::size_t kc, const float* a, std::ptrdiff_t rs,
                                         std::ptrdiff_t cs, const float* panel, float* c,
                                         std::size_t ldc, std::size_t nr, bool overwrite) {
  using V = typename S::vec;
  V acc[M][S::nv] = {};
  const float* row[M];
  for (int i = 0; i < M; ++i) row[i] = a + i * rs;
  std::ptrdiff_t kk = 0;
  for (std::size_t k = 0; k < kc; ++k, kk += cs) {
    V b[S::nv];
    for (int v = 0; v < S::nv; ++v) load(b[v], panel + k * S::nr + v * S::width);
    for (int i = 0; i < M; ++i) {
      const float s = row[i][kk];
      for (int v = 0; v < S::nv; ++v) acc[i][v] += b[v] * s;
    }
  }
  for (int i = 0; i < M; ++i) {
    float* ci = c + static_cast<std::size_t>(i) * ldc;
    if (nr == S::nr) {
      for (int v = 0; v < S::nv; ++v) {
        float* p = ci + v * S::width;
        V old = {};
        if (!overwrite) load(old, p);
        store(p, V(acc[i][v] + old));
      }
    } else {
      float tile[S::nr];
      for (int v = 0; v < S::nv; ++v) store(tile + v * S::width, acc[i][v]);
      if constexpr (LiveC) {
        for (std::size_t j = 0; j < nr; ++j)
          store_live(ci + j, overwrite ? tile[j] : load_live(ci + j) + tile[j]);
      } else {
        for (std::size_t j = 0; j < nr; ++j) ci[j] = overwrite ? tile[j] : ci[j] + tile[j];
      }
    }
  }
}

// The row tile for the last m < MR rows: one instantiation per height.
template <class S, int M, bool LiveC>
[[gnu::always_inline]] inline void micro_edge(int m, std::size_t kc, const float* a,
                                              std::ptrdiff_t rs, std::ptrdiff_t cs,
                                              const float* panel, float* c, std::size_t ldc,
                                              std::size_t nr, bool overwrite) {
  if constexpr (M > 0) {
    if (m == M) return micro<S, M, LiveC>(kc, a, rs, cs, panel, c, ldc, nr, overwrite);
    micro_edge<S, M - 1, LiveC>(m, kc, a, rs, cs, panel, c, ldc, nr, overwrite);
  }
}

// panel[k * NR + j] = B(k0 + k, j0 + j), zero beyond nr columns.
template <class S>
[[gnu::always_inline]] inline void pack(const Matrix& b, std::size_t k0, std::size_t kc,
                                        std::size_t j0, std::size_t nr, float* panel) {
  for (std::size_t k = 0; k < kc; ++k) {
    const float* src = b.data + static_cast<std::ptrdiff_t>(k0 + k) * b.rs +
                       static_cast<std::ptrdiff_t>(j0) * b.cs;
    float* dst = panel + k * S::nr;
    if (b.cs == 1) {
      std::memcpy(dst, src, nr * sizeof(float));
    } else {
      for (std::size_t j = 0; j < nr; ++j) dst[j] = src[static_cast<std::ptrdiff_t>(j) * b.cs];
    }
    std::fill(dst + nr, dst + S::nr, 0.f);
  }
}

// dst[0, n) = src[0, n) from a live tensor: whole vector lanes, the tail one float at
// a time (as kernels::copy_from_shared, inside the ISA's clone).
template <class S>
[[gnu::always_inline]] inline void copy_live(float* dst, const float* src, std::size_t n) {
  using V = typename S::vec;
  std::size_t i = 0;
  V v;
  for (; i + S::width <= n; i += S::width) {
    load(v, src + i);
    store(dst + i, v);
  }
  v4f q;
  for (; i + 4 <= n; i += 4) {
    load(q, src + i);
    store(dst + i, q);
  }
  for (; i < n; ++i) dst[i] = load_live(src + i);
}

// A live A's rows [0, rows) x [0, kc) copied into buf before a micro-kernel reads them:
// the micro-kernel's broadcasts fold into its multiply-adds only as plain loads, so a
// live tile is first read in whole lanes into L1 (MR x kc floats). Returns the
// copy's view. Either stride may be the unit one (A or A^T read in place).
template <class S>
[[gnu::always_inline]] inline Matrix pack_live(const float* a, std::ptrdiff_t rs,
                                               std::ptrdiff_t cs, std::size_t rows,
                                               std::size_t kc, float* buf) {
  if (cs == 1) {
    for (std::size_t i = 0; i < rows; ++i)
      copy_live<S>(buf + i * kc, a + static_cast<std::ptrdiff_t>(i) * rs, kc);
    return {buf, static_cast<std::ptrdiff_t>(kc), 1};
  }
  if (rs == 1) {
    for (std::size_t k = 0; k < kc; ++k)
      copy_live<S>(buf + k * S::mr, a + static_cast<std::ptrdiff_t>(k) * cs, rows);
    return {buf, 1, static_cast<std::ptrdiff_t>(S::mr)};
  }
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < kc; ++k)
      buf[i * kc + k] = load_live(a + static_cast<std::ptrdiff_t>(i) * rs +
                                  static_cast<std::ptrdiff_t>(k) * cs);
  return {buf, static_cast<std::ptrdiff_t>(kc), 1};
}

std::vector<float>& panel_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}
std::vector<float>& live_a_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

template <class S, bool LiveA, bool LiveC>
[[gnu::always_inline]] inline void gemm_impl(std::size_t m, std::size_t n, std::size_t k,
                                             Matrix a, Matrix b, float* c, std::size_t ldc,
                                             bool accumulate) {
  if (k == 0) {
    if (!accumulate)
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          if constexpr (LiveC) store_live(c + i * ldc + j, 0.f);
          else c[i * ldc + j] = 0.f;
        }
    return;
  }
  auto& buffer = panel_buffer();
  constexpr std::size_t kc_max = LiveA ? kKcLive : kKc;
  buffer.resize(kc_max * S::nr);
  float* panel = buffer.data();
  constexpr auto mr = static_cast<std::size_t>(S::mr);
  float* tile = nullptr;  // the live A tile's copy
  if constexpr (LiveA) {
    auto& t = live_a_buffer();
    t.resize(kc_max * mr);
    tile = t.data();
  }
  for (std::size_t k0 = 0; k0 < k; k0 += kc_max) {
    const std::size_t kc = std::min(kc_max, k - k0);
    const bool overwrite = k0 == 0 && !accumulate;
    const float* ak = a.data + static_cast<std::ptrdiff_t>(k0) * a.cs;
    // A live A is copied once per panel of B; the MLP's live products have n <= NR.
    // (No lambda here: it would be compiled for the baseline ISA, not inlined.)
    for (std::size_t j0 = 0; j0 < n; j0 += S::nr) {
      const std::size_t nr = std::min(S::nr, n - j0);
      pack<S>(b, k0, kc, j0, nr, panel);
      for (std::size_t i0 = 0; i0 < m; i0 += mr) {
        const std::size_t rows = std::min(mr, m - i0);
        Matrix at{ak + static_cast<std::ptrdiff_t>(i0) * a.rs, a.rs, a.cs};
        if constexpr (LiveA) at = pack_live<S>(at.data, a.rs, a.cs, rows, kc, tile);
        float* ct = c + i0 * ldc + j0;
        if (rows == mr)
          micro<S, S::mr, LiveC>(kc, at.data, at.rs, at.cs, panel, ct, ldc, nr, overwrite);
        else
          micro_edge<S, S::mr - 1, LiveC>(static_cast<int>(rows), kc, at.data, at.rs, at.cs,
                                          panel, ct, ldc, nr, overwrite);
      }
    }
  }
}

// The four operand cases, chosen once per call.
template <class S>
[[gnu::always_inline]] inline void gemm_live(std::size_t m, std::size_t n, std::size_t k,
                                             Matrix a, Matrix b, float* c, std::size_t ldc,
                                             bool acc, Live live) {
  if (live.a && live.c) return gemm_impl<S, true, true>(m, n, k, a, b, c, ldc, acc);
  if (live.a) return gemm_impl<S, true, false>(m, n, k, a, b, c, ldc, acc);
  if (live.c) return gemm_impl<S, false, true>(m, n, k, a, b, c, ldc, acc);
  gemm_impl<S, false, false>(m, n, k, a, b, c, ldc, acc);
}

__attribute__((target("avx512f"))) void gemm_avx512(std::size_t m, std::size_t n,
                                                    std::size_t k, Matrix a, Matrix b,
                                                    float* c, std::size_t ldc, bool acc,
                                                    Live live) {
  gemm_live<Avx512Shape>(m, n, k, a, b, c, ldc, acc, live);
}
__attribute__((target("avx2,fma"))) void gemm_avx2(std::size_t m, std::size_t n, std::size_t k,
                                                   Matrix a, Matrix b, float* c,
                                                   std::size_t ldc, bool acc, Live live) {
  gemm_live<Avx2Shape>(m, n, k, a, b, c, ldc, acc, live);
}
void gemm_generic(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
                  std::size_t ldc, bool acc, Live live) {
  gemm_live<GenericShape>(m, n, k, a, b, c, ldc, acc, live);
}

}  // namespace

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
// Every product on a live operand passes through here, so that it is on the stack of
// every race the product takes part in (tests/tsan.supp names it).
__attribute__((noinline)) void gemm_on_live(Isa isa, std::size_t m, std::size_t n,
                                            std::size_t k, Matrix a, Matrix b, float* c,
                                            std::size_t ldc, bool accumulate, Live live) {
  switch (isa) {
    case Isa::avx512: return gemm_avx512(m, n, k, a, b, c, ldc, accumulate, live);
    case Isa::avx2: return gemm_avx2(m, n, k, a, b, c, ldc, accumulate, live);
    case Isa::generic: return gemm_generic(m, n, k, a, b, c, ldc, accumulate, live);
  }
}
}  // namespace

void gemm(Isa isa, std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
          std::size_t ldc, bool accumulate, Live live) {
  if (live.a || live.c) return gemm_on_live(isa, m, n, k, a, b, c, ldc, accumulate, live);
  switch (isa) {
    case Isa::avx512: return gemm_avx512(m, n, k, a, b, c, ldc, accumulate, live);
    case Isa::avx2: return gemm_avx2(m, n, k, a, b, c, ldc, accumulate, live);
    case Isa::generic: return gemm_generic(m, n, k, a, b, c, ldc, accumulate, live);
  }
}

void gemm(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
          std::size_t ldc, bool accumulate, Live live) {
  gemm(best_isa(), m, n, k, a, b, c, ldc, accumulate, live);
}

void gemm_naive(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, float* c,
                std::size_t ldc, bool accumulate) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float s = accumulate ? c[i * ldc + j] : 0.f;
      for (std::size_t p = 0; p < k; ++p)
        s += a.data[static_cast<std::ptrdiff_t>(i) * a.rs + static_cast<std::ptrdiff_t>(p) * a.cs] *
             b.data[static_cast<std::ptrdiff_t>(p) * b.rs + static_cast<std::ptrdiff_t>(j) * b.cs];
      c[i * ldc + j] = s;
    }
}

// The dense read half of THE INTENDED RACE: whole 16-byte lanes (aligned, so each
// float is read whole), the tail through relaxed atomic_ref. tests/tsan.supp names it.
void copy_from_shared(float* dst, const float* src, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    detail::vstore(dst + i, detail::vload(src + i));
    detail::vstore(dst + i + 4, detail::vload(src + i + 4));
  }
  for (; i < n; ++i) dst[i] = detail::relaxed_load(src + i);
}

}  // namespace hogwild::kernels
