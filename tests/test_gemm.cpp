// The dense kernel (src/kernels/gemm.hpp) against the naive triple loop, for every
// instruction set this CPU supports, on edge shapes (rows and columns that do not
// fill a register tile, k beyond one packed block, k = 0), transposed operands and
// accumulation, live (shared) operands; and the copy of a shared tensor. Then the
// bf16 products on each unit the CPU has (AMX tiles, AVX512-BF16; suites amx and
// avx512_bf16, skipped where it is absent) and their packing (suite bf16).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "support.hpp"
#include "hogwild/rng.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

using namespace hogwild;
using kernels::Isa;
using kernels::Matrix;

namespace {

std::vector<float> random(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// A view of a rows x cols matrix stored row-major (or column-major when transposed).
Matrix view(const std::vector<float>& v, std::size_t rows, std::size_t cols, bool transposed) {
  (void)rows;
  return transposed ? Matrix{v.data(), 1, static_cast<std::ptrdiff_t>(rows)}
                    : Matrix{v.data(), static_cast<std::ptrdiff_t>(cols), 1};
}

}  // namespace

TEST_CASE("gemm matches the naive loop on every supported instruction set") {
  Rng rng(3);
  int checked = 0;
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (!kernels::supported(isa)) {
      MESSAGE("skipping " << kernels::to_string(isa) << ": not supported by this CPU");
      continue;
    }
    for (std::size_t m : {1u, 5u, 8u, 13u, 33u})
      for (std::size_t n : {1u, 15u, 32u, 40u})
        for (std::size_t k : {0u, 1u, 7u, 300u})
          for (int layout = 0; layout < 16; ++layout) {
            const bool ta = layout & 1, tb = layout & 2;
            // A live operand changes how it is loaded and stored, not the result.
            const kernels::Live live{(layout & 4) != 0, (layout & 8) != 0};
            const bool accumulate = (m + n + k) % 2 == 1;
            auto a = random(m * k, rng), b = random(k * n, rng);
            const std::size_t ldc = n + 3;  // a row stride wider than the row
            auto c = random(m * ldc, rng), expected = c;
            kernels::gemm(isa, m, n, k, view(a, m, k, ta), view(b, k, n, tb), c.data(), ldc,
                          accumulate, live);
            kernels::gemm_naive(m, n, k, view(a, m, k, ta), view(b, k, n, tb), expected.data(),
                                ldc, accumulate);
            INFO(kernels::to_string(isa) << " m=" << m << " n=" << n << " k=" << k
                                         << " ta=" << ta << " tb=" << tb << " acc=" << accumulate
                                         << " live a=" << live.a << " c=" << live.c);
            for (std::size_t i = 0; i < c.size(); ++i) {
              // Entries are sums of k products of unit normals: scale sqrt(k + 1).
              REQUIRE(c[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(std::sqrt(static_cast<double>(k) + 1)));
            }
            ++checked;
          }
  }
  CHECK(checked >= 1280);
  CHECK(kernels::supported(kernels::best_isa()));
}

TEST_CASE("copy_from_shared copies every float, including a tail shorter than a lane") {
  Rng rng(5);
  for (std::size_t n : {0u, 3u, 8u, 29u, 1000u}) {
    auto src = random(n + 1, rng);
    std::vector<float> dst(n + 1, -7.f);
    kernels::copy_from_shared(dst.data(), src.data(), n);
    for (std::size_t i = 0; i < n; ++i) CHECK(dst[i] == src[i]);
    CHECK(dst[n] == -7.f);
  }
}

// The bf16 products (src/kernels/gemm_bf16.hpp): their rounding, packing, and each
// unit's products against sums of the rounded operands' products.
namespace {

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = kernels::bf16::widen(kernels::bf16::round(v[i]));
  return r;
}

}  // namespace

TEST_CASE("bf16 rounding is to nearest, ties to even") {
  using kernels::bf16::round;
  using kernels::bf16::widen;
  CHECK(widen(round(1.0f)) == 1.0f);
  CHECK(widen(round(-2.5f)) == -2.5f);
  CHECK(widen(round(255.0f)) == 255.0f);  // 8 significant bits: every byte is exact
  CHECK(widen(round(257.0f)) == 256.0f);  // a tie (256 + 1/2 ulp): to even, down
  CHECK(widen(round(259.0f)) == 260.0f);  // a tie: to even, up
  CHECK(widen(round(1.0f + 1.0f / 128)) == 1.0f + 1.0f / 128);  // the last bit kept
  CHECK(widen(round(1.0f + 1.0f / 200)) == 1.0f + 1.0f / 128);  // nearer 1 + 1/128 than 1
  CHECK(std::abs(widen(round(0.1f)) - 0.1f) <= 0.1f / 256);
}

namespace {

// Every epilogue of the unit's products, on edge shapes and transposed sources,
// against a double-precision sum of the products of the bf16-rounded operands. Those
// products are exact in float (8 x 8 significant bits), so the unit differs from the
// reference only by its float additions: k of them into an accumulator (two per
// vdpbf16ps step, whose intermediate rounding is the unit's own), then, for
// add_live, one fused multiply-add into C. Each rounds by at most u = 2^-24 of what
// it sums, so |error| <= 2 (k + 2) u (|alpha| sum_p |a_ip b_pj| + |c_ij|), the bound
// of a recursive sum (Higham, Accuracy and Stability, 4.2) with room for two
// roundings per step; the check uses that bound, element by element, and no looser.
void check_products(kernels::bf16::Unit unit) {
  namespace bf = kernels::bf16;
  Rng rng(11);
  struct Shape {
    std::size_t m, n, k;
  };
  int checked = 0;
  for (Shape s : {Shape{1, 1, 1}, Shape{16, 16, 32}, Shape{17, 15, 33}, Shape{32, 32, 64},
                  Shape{33, 47, 31}, Shape{256, 32, 784}, Shape{256, 784, 32}, Shape{10, 32, 128},
                  Shape{32, 128, 10}, Shape{9, 50, 3}, Shape{5, 3, 0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto e : {bf::Epilogue::store, bf::Epilogue::store_transposed, bf::Epilogue::add_live}) {
          const bool add = e == bf::Epilogue::add_live;
          const bool tc = e == bf::Epilogue::store_transposed;
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(static_cast<int>(e));
          const auto a = random(s.m * s.k, rng), b = random(s.k * s.n, rng);
          const auto ar = rounded(a), br = rounded(b);
          // C is m x n, or n x m stored transposed; rows padded by 3 floats, which
          // must stay untouched.
          const std::size_t rows = tc ? s.n : s.m, ldc = (tc ? s.m : s.n) + 3;
          auto c = random(rows * ldc, rng);
          std::vector<double> want(c.begin(), c.end()), bound(c.size(), 0.0);
          const double alpha = add ? -0.25 : 1.0;
          const double u = std::ldexp(1.0, -24);
          for (std::size_t i = 0; i < s.m; ++i)
            for (std::size_t j = 0; j < s.n; ++j) {
              double sum = 0, magnitude = 0;
              for (std::size_t p = 0; p < s.k; ++p) {
                const double t = double(ar[ta ? p * s.m + i : i * s.k + p]) *
                                 double(br[tb ? j * s.k + p : p * s.n + j]);
                sum += t;
                magnitude += std::abs(t);
              }
              const std::size_t at = tc ? j * ldc + i : i * ldc + j;
              const double old = add ? want[at] : 0.0;
              want[at] = old + alpha * sum;
              bound[at] = 2.0 * double(s.k + 2) * u * (std::abs(alpha) * magnitude + std::abs(old));
            }
          bf::Packed pa, pb;
          const Matrix va = view(a, s.m, s.k, ta), vb = view(b, s.k, s.n, tb);
          bf::pack_a(s.m, s.k, va.data, va.rs, va.cs, pa);
          bf::pack_b(s.k, s.n, vb.data, vb.rs, vb.cs, pb);
          bf::gemm(unit, s.m, s.n, s.k, pa.data(), pb.data(), c.data(), ldc, e,
                   static_cast<float>(alpha));
          std::size_t bad = 0;
          for (std::size_t i = 0; i < c.size(); ++i) bad += std::abs(c[i] - want[i]) > bound[i];
          CHECK(bad == 0);
          ++checked;
        }
  CHECK(checked == 11 * 12);
}

}  // namespace

TEST_CASE("bf16 products on the AMX tile unit match the sums of the rounded operands' products" * doctest::test_suite("amx")) {
  if (!kernels::bf16::supported(kernels::bf16::Unit::amx)) {
    test::skip("AMX: " + kernels::bf16::unavailable_reason());
    return;
  }
  check_products(kernels::bf16::Unit::amx);
}

TEST_CASE("bf16 products on AVX512-BF16 match the sums of the rounded operands' products" * doctest::test_suite("avx512_bf16")) {
  if (!kernels::bf16::supported(kernels::bf16::Unit::avx512)) {
    test::skip("AVX512-BF16: " + kernels::bf16::unavailable_reason());
    return;
  }
  check_products(kernels::bf16::Unit::avx512);
}

TEST_CASE("bf16 products run on the best supported unit, and refuse where none is" * doctest::test_suite("bf16")) {
  namespace bf = kernels::bf16;
  if (!bf::available()) {
    CHECK(!bf::unavailable_reason().empty());
    CHECK_THROWS_AS(bf::gemm(1, 1, 1, nullptr, nullptr, nullptr, 1), std::logic_error);
    test::skip(bf::unavailable_reason());
    return;
  }
  CHECK(bf::unavailable_reason().empty());
  CHECK(bf::supported(bf::best_unit()));
  if (bf::supported(bf::Unit::amx)) CHECK(bf::best_unit() == bf::Unit::amx);
  MESSAGE("bf16 products on " << bf::to_string(bf::best_unit()));
  for (bf::Unit unit : {bf::Unit::amx, bf::Unit::avx512})
    if (!bf::supported(unit)) {
      float c = 0;
      const std::uint16_t one = bf::round(1.f);
      CHECK_THROWS_AS(bf::gemm(unit, 1, 1, 1, &one, &one, &c, 1), std::logic_error);
    }
}

TEST_CASE("bf16 packing of a live source needs unit column stride; padding is zero" * doctest::test_suite("bf16")) {
  if (!kernels::bf16::available()) {
    test::skip(kernels::bf16::unavailable_reason());
    return;
  }
  std::vector<float> w(3 * 5, 1.f);
  kernels::bf16::Packed p(100, 0xffff);  // stale contents must not survive
  kernels::bf16::pack_a(3, 5, w.data(), 5, 1, p, true);
  REQUIRE(p.size() >= 16 * 32);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t k = 0; k < 32; ++k)
      CHECK(p[i * 32 + k] == (i < 3 && k < 5 ? kernels::bf16::round(1.f) : 0));
  kernels::bf16::pack_b(5, 3, w.data(), 3, 1, p, true);
  REQUIRE(p.size() >= 32 * 16);
  for (std::size_t q = 0; q < 16; ++q)
    for (std::size_t j = 0; j < 16; ++j)
      for (std::size_t h = 0; h < 2; ++h)
        CHECK(p[(q * 16 + j) * 2 + h] == (2 * q + h < 5 && j < 3 ? kernels::bf16::round(1.f) : 0));
  CHECK_THROWS_AS(kernels::bf16::pack_a(3, 5, w.data(), 1, 3, p, true), std::invalid_argument);
  CHECK_THROWS_AS(kernels::bf16::pack_b(5, 3, w.data(), 1, 5, p, true), std::invalid_argument);
}

TEST_CASE("bf16 packs of byte rows equal the packs of the rows widened to floats" * doctest::test_suite("bf16")) {
  if (!kernels::bf16::available()) {
    test::skip(kernels::bf16::unavailable_reason());
    return;
  }
  Rng rng(5);
  for (std::size_t count : {1u, 5u, 16u, 32u, 33u})
    for (std::size_t width : {1u, 15u, 16u, 17u, 784u}) {
      CAPTURE(count);
      CAPTURE(width);
      // Each row at its own address, as a batch's rows are; floats as byte / 255.
      std::vector<std::vector<std::uint8_t>> rows(count, std::vector<std::uint8_t>(width));
      std::vector<const std::uint8_t*> ptr;
      std::vector<float> widened;
      for (auto& r : rows) {
        for (auto& b : r) b = static_cast<std::uint8_t>(rng.below(256));
        ptr.push_back(r.data());
        for (auto b : r) widened.push_back(static_cast<float>(b) * (1.0f / 255.0f));
      }
      const auto w = static_cast<std::ptrdiff_t>(width);
      kernels::bf16::Packed from_bytes, from_floats;
      // The forward product's H (width x count) and the gradient's H^T (count x width).
      kernels::bf16::pack_b_byte_columns(width, count, ptr.data(), from_bytes);
      kernels::bf16::pack_b(width, count, widened.data(), 1, w, from_floats);
      const std::size_t size = kernels::bf16::pad(width, 32) * kernels::bf16::pad(count, 16);
      CHECK(std::equal(from_bytes.begin(), from_bytes.begin() + static_cast<std::ptrdiff_t>(size),
                       from_floats.begin()));
      kernels::bf16::pack_b_byte_rows(count, width, ptr.data(), from_bytes);
      kernels::bf16::pack_b(count, width, widened.data(), w, 1, from_floats);
      const std::size_t size_rows = kernels::bf16::pad(count, 32) * kernels::bf16::pad(width, 16);
      CHECK(std::equal(from_bytes.begin(), from_bytes.begin() + static_cast<std::ptrdiff_t>(size_rows),
                       from_floats.begin()));
    }
}
