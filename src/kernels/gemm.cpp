// The dense products through oneDNN (gemm.hpp): fp32 through its BLAS-like
// dnnl_sgemm (row-major, a transpose per operand, no setup per call), bf16 through a
// matmul primitive per shape, created once per thread and kept (creating one costs
// tens of microseconds: as much as a product). alpha reaches a bf16 primitive as a
// runtime output scale (one primitive for every step size), which oneDNN 2.6 gives to
// its gemm:jit implementation only, not to brg:avx512_core_bf16: 0.7-0.97x of its
// speed on the MLP's update shapes, less than a second pass over C would cost; the
// unscaled products keep brg.
#include "kernels/gemm.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hogwild/update_policy.hpp"
#include "kernels/gemm_bf16.hpp"

// The OpenMP runtime oneDNN runs on (libgomp, linked beside it): declared here rather
// than through <omp.h>, whose -fopenmp would, under clang, name another runtime.
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace hogwild::kernels {

namespace {

// The calling thread's OpenMP team size, 1 while it lives (see gemm.hpp).
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

// A row-major operand as BLAS sees it: 'N' with the row stride as leading dimension
// when its columns are contiguous, else 'T' (the stored matrix is its transpose) with
// the column stride. A leading dimension matters only past the first stored row, so
// a single one gets the smallest valid value.
struct Blas {
  char trans;
  dnnl_dim_t ld;
};
Blas blas(std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows, std::size_t cols) {
  const auto r = static_cast<dnnl_dim_t>(rows), c = static_cast<dnnl_dim_t>(cols);
  if (cs == 1) return {'N', rows <= 1 ? std::max<dnnl_dim_t>(c, 1) : rs};
  if (rs == 1) return {'T', cols <= 1 ? std::max<dnnl_dim_t>(r, 1) : cs};
  throw std::invalid_argument("kernels::gemm: an operand needs a unit row or column stride");
}

// C = 0 (k == 0 and not accumulating), which oneDNN's matmul does not take.
void zero_or_keep(std::size_t m, std::size_t n, bool accumulate, float* c, std::size_t ldc) {
  if (!accumulate)
    for (std::size_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.f);
}

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string("oneDNN ") + what + " failed (status " +
                             std::to_string(static_cast<int>(status)) + ")");
}

// A bf16 matmul primitive for one shape and layout, with its memory objects.
struct Bf16Product {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst, scale;
  float alpha = 1;  // what scale holds
};

using Bf16Key = std::tuple<std::size_t, std::size_t, std::size_t, std::ptrdiff_t, std::ptrdiff_t,
                           std::ptrdiff_t, std::ptrdiff_t, std::size_t, bool, bool>;

const dnnl::engine& engine() {
  thread_local const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Bf16Product& bf16_product(std::size_t m, std::size_t n, std::size_t k, Bf16Matrix a,
                          Bf16Matrix b, bool accumulate, std::size_t ldc, bool scaled) {
  thread_local std::map<Bf16Key, std::unique_ptr<Bf16Product>> cache;
  auto& slot = cache[{m, n, k, a.rs, a.cs, b.rs, b.cs, ldc, accumulate, scaled}];
  if (slot) return *slot;
  using dt = dnnl::memory::data_type;
  const auto md = [](std::size_t rows, std::size_t cols, std::ptrdiff_t rs, std::ptrdiff_t cs,
                     dt type) {
    return dnnl::memory::desc({static_cast<dnnl::memory::dim>(rows), static_cast<dnnl::memory::dim>(cols)},
                              type, {static_cast<dnnl::memory::dim>(rs), static_cast<dnnl::memory::dim>(cs)});
  };
  const auto sm = md(m, k, a.rs, a.cs, dt::bf16), wm = md(k, n, b.rs, b.cs, dt::bf16);
  const auto dm = md(m, n, static_cast<std::ptrdiff_t>(ldc), 1, dt::f32);
  dnnl::primitive_attr attr;
  if (scaled) attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(sm, wm, dm), attr, engine());
  slot = std::make_unique<Bf16Product>();
  Bf16Product& p = *slot;
  p.prim = dnnl::matmul(pd);
  p.src = dnnl::memory(sm, engine(), DNNL_MEMORY_NONE);
  p.weights = dnnl::memory(wm, engine(), DNNL_MEMORY_NONE);
  p.dst = dnnl::memory(dm, engine(), DNNL_MEMORY_NONE);
  p.scale = dnnl::memory({{1}, dt::f32, {1}}, engine(), &p.alpha);
  return p;
}

std::string probe_bf16() {
  if (const char* off = std::getenv("HOGWILD_DISABLE_AVX512BF16"); off && *off && *off != '0')
    return "AVX512-BF16 is disabled by HOGWILD_DISABLE_AVX512BF16";
#if defined(__x86_64__)
  // (libgcc's checks include the OS's saving of the zmm state, XGETBV.)
  if (!__builtin_cpu_supports("avx512bf16"))
    return "this CPU has no AVX512-BF16 (Intel Cooper Lake and Sapphire Rapids, AMD Zen 4 and "
           "later have it)";
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16)
    return "oneDNN does not use AVX512-BF16 here (ONEDNN_MAX_CPU_ISA?)";
  return {};
#else
  return "AVX512-BF16 needs an x86-64 CPU";
#endif
}

const std::string& bf16_reason() {
  static const std::string r = probe_bf16();
  return r;
}

#if defined(__x86_64__)
// 32 floats at a time: two whole 16-lane loads, one vcvtne2ps2bf16 (round to nearest
// even); the tail through masked loads, each lane one whole float.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void to_bf16_avx512(
    const float* src, std::size_t n, std::uint16_t* dst, float scale) noexcept {
  const __m512 s = _mm512_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_mul_ps(s, _mm512_loadu_ps(src + i));
    const __m512 hi = _mm512_mul_ps(s, _mm512_loadu_ps(src + i + 16));
    _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  if (i < n) {
    const std::size_t left = n - i;
    const auto mask = [](std::size_t count) {
      return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1);
    };
    const __mmask16 m0 = mask(left), m1 = mask(left > 16 ? left - 16 : 0);
    const __m512 lo = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m0, src + i));
    const __m512 hi = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m1, src + i + 16));
    const auto bits = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi16(dst + i, left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1, bits);
  }
}
#endif

}  // namespace

void gemm(std::size_t m, std::size_t n, std::size_t k, Matrix a, Matrix b, bool accumulate,
          float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_or_keep(m, n, accumulate, c, ldc);
  const Blas ta = blas(a.rs, a.cs, m, k), tb = blas(b.rs, b.cs, k, n);
  const OneThread one;
  check(dnnl_sgemm(ta.trans, tb.trans, static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(n),
                   static_cast<dnnl_dim_t>(k), 1.f, a.data, ta.ld, b.data, tb.ld,
                   accumulate ? 1.f : 0.f, c, static_cast<dnnl_dim_t>(ldc)),
        "sgemm");
}

void gemm(std::size_t m, std::size_t n, std::size_t k, Bf16Matrix a, Bf16Matrix b,
          bool accumulate, float* c, std::size_t ldc, float alpha) {
  if (!bf16_supported()) throw std::logic_error("bf16 products: " + bf16_reason());
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_or_keep(m, n, accumulate, c, ldc);
  const OneThread one;
  const bool scaled = alpha != 1;
  Bf16Product& p = bf16_product(m, n, k, a, b, accumulate, ldc, scaled);
  p.src.set_data_handle(const_cast<std::uint16_t*>(a.data));
  p.weights.set_data_handle(const_cast<std::uint16_t*>(b.data));
  p.dst.set_data_handle(c);
  p.alpha = alpha;
  thread_local dnnl::stream stream(engine());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, p.dst}};
  if (scaled) args.emplace(DNNL_ARG_ATTR_OUTPUT_SCALES, p.scale);
  p.prim.execute(stream, args);
  stream.wait();
}

bool bf16_supported() noexcept { return bf16_reason().empty(); }
std::string bf16_unsupported_reason() { return bf16_reason(); }

void to_bf16(const float* src, std::size_t n, std::uint16_t* dst, float scale) noexcept {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512bf16")) return to_bf16_avx512(src, n, dst, scale);
#endif
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16::round(scale * detail::relaxed_load(src + i));
}

// The dense read half of THE INTENDED RACE: whole 16-byte lanes (aligned, so each
// float is read whole), the head up to the first aligned lane and the tail through
// relaxed loads. tests/tsan.supp names it.
void copy_from_shared(float* dst, const float* src, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(src + i) % 16 != 0; ++i)
    dst[i] = detail::relaxed_load(src + i);
  for (; i + 8 <= n; i += 8) {
    detail::vstore(dst + i, detail::vload(src + i));
    detail::vstore(dst + i + 4, detail::vload(src + i + 4));
  }
  for (; i < n; ++i) dst[i] = detail::relaxed_load(src + i);
}

}  // namespace hogwild::kernels
