// The dense products (src/kernels/gemm.hpp, through oneDNN) against a triple loop, on
// edge shapes (rows and columns of one, k = 0, k past a block), transposed operands
// and accumulation; the copy of a shared tensor; the bf16 rounding. Then the bf16
// products: through oneDNN on AVX512-BF16 (suite avx512_bf16) and on our AMX tiles
// with their packing and epilogues (suite amx), each skipped where the CPU lacks it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "support.hpp"
#include "hogwild/rng.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"

using namespace hogwild;
using kernels::Bf16Matrix;
using kernels::Matrix;

namespace {

std::vector<float> random(std::size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// A view of a rows x cols matrix stored row-major (or column-major when transposed).
template <class M, class T>
M view(const std::vector<T>& v, std::size_t rows, std::size_t cols, bool transposed) {
  return transposed ? M{v.data(), 1, static_cast<std::ptrdiff_t>(rows)}
                    : M{v.data(), static_cast<std::ptrdiff_t>(cols), 1};
}

// Element (i, p) of a row-major rows x cols matrix, or of its column-major copy.
template <class T>
double at(const std::vector<T>& v, std::size_t rows, std::size_t cols, bool transposed,
          std::size_t i, std::size_t p) {
  const T x = transposed ? v[p * rows + i] : v[i * cols + p];
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return kernels::bf16::widen(x);
}

// The reference: C (m x n, row stride ldc) = alpha A·B (+ C), summed in double, and
// for each element the bound of a recursive float sum of those k products plus the
// add to C: each of the k + 1 additions rounds by at most u = 2^-24 of what it sums,
// so |error| <= (k + 1) u (sum_p |alpha a_ip b_pj| + |c_ij|) (Higham, Accuracy and
// Stability of Numerical Algorithms, 4.2); the products themselves are exact in
// float for bf16 operands (8 x 8 significant bits) and within u for floats, which
// one more u per term covers. Where an implementation adds in pairs or blocks the
// bound only loosens, so the check holds any order.
template <class T>
void reference(std::size_t m, std::size_t n, std::size_t k, float alpha, const std::vector<T>& a,
               bool ta, const std::vector<T>& b, bool tb, bool accumulate, std::vector<double>& c,
               std::size_t ldc, std::vector<double>& bound) {
  const double u = std::ldexp(1.0, -24);
  bound.assign(c.size(), 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double t = alpha * at(a, m, k, ta, i, p) * at(b, k, n, tb, p, j);
        sum += t;
        magnitude += std::abs(t);
      }
      double& out = c[i * ldc + j];
      const double old = accumulate ? out : 0.0;
      out = old + sum;
      bound[i * ldc + j] = double(k + 2) * u * (magnitude + std::abs(old)) + 1e-30;
    }
}

// Elements of got outside want's bounds (the padding of each row included: it must
// keep its value, where the bound is 0).
std::size_t outside(const std::vector<float>& got, const std::vector<double>& want,
                    const std::vector<double>& bound) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += std::abs(got[i] - want[i]) > bound[i];
  return bad;
}

struct Shape {
  std::size_t m, n, k;
};
// Edge shapes, then the MLP's (784-256-128-10 at batch 32: forward, gradient, backprop).
const Shape kShapes[] = {{1, 1, 1},    {1, 17, 5},    {17, 1, 5},    {5, 3, 0},
                         {13, 40, 7},  {33, 15, 300}, {16, 16, 32},  {33, 47, 31},
                         {256, 32, 784}, {256, 784, 32}, {784, 32, 256}, {10, 32, 128},
                         {128, 32, 10}};

// check(s, a, ta, b, tb, accumulate, c, ldc) for every shape and layout, on random
// operands and a C with a row stride wider than its rows.
template <class Check>
void for_each_case(Check check) {
  Rng rng(3);
  int checked = 0;
  for (Shape s : kShapes)
    for (int layout = 0; layout < 8; ++layout) {
      const bool ta = layout & 1, tb = layout & 2, accumulate = layout & 4;
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(ta);
      CAPTURE(tb);
      CAPTURE(accumulate);
      const auto a = random(s.m * s.k, rng), b = random(s.k * s.n, rng);
      const std::size_t ldc = s.n + 3;
      auto c = random(s.m * ldc, rng);
      check(s, a, ta, b, tb, accumulate, c, ldc);
      ++checked;
    }
  CHECK(checked == 13 * 8);
}

}  // namespace

TEST_CASE("gemm matches the sums of its products, transposed and accumulating") {
  for_each_case([](Shape s, const std::vector<float>& a, bool ta, const std::vector<float>& b,
                   bool tb, bool accumulate, std::vector<float>& c, std::size_t ldc) {
    std::vector<double> want(c.begin(), c.end()), bound;
    reference(s.m, s.n, s.k, 1.f, a, ta, b, tb, accumulate, want, ldc, bound);
    kernels::gemm(s.m, s.n, s.k, view<Matrix>(a, s.m, s.k, ta), view<Matrix>(b, s.k, s.n, tb),
                  accumulate, c.data(), ldc);
    CHECK(outside(c, want, bound) == 0);
  });
  // Neither stride unit: refused.
  std::vector<float> x(16, 1.f), y(4);
  CHECK_THROWS_AS(kernels::gemm(2, 2, 2, Matrix{x.data(), 4, 2}, Matrix{x.data(), 2, 1}, false,
                                y.data(), 2),
                  std::invalid_argument);
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

TEST_CASE("to_bf16 rounds as bf16::round, scaled, tails included") {
  Rng rng(9);
  for (std::size_t n : {0u, 1u, 15u, 16u, 31u, 32u, 33u, 100u}) {
    auto src = random(n, rng);
    src.push_back(257.f);  // a tie
    std::vector<std::uint16_t> got(n + 3, 0xabcd);
    for (float scale : {1.f, -0.03125f, 0.1f}) {
      kernels::to_bf16(src.data(), n + 1, got.data(), scale);
      for (std::size_t i = 0; i <= n; ++i) CHECK(got[i] == kernels::bf16::round(scale * src[i]));
      CHECK(got[n + 1] == 0xabcd);  // nothing written past the end
    }
  }
}

// The bf16 products through oneDNN, against the sums of the rounded operands'
// products (exact in float), with the bound of reference().
TEST_CASE("bf16 products on AVX512-BF16 match the sums of the rounded operands' products" * doctest::test_suite("avx512_bf16")) {
  if (!kernels::bf16_supported()) {
    test::skip(kernels::bf16_unsupported_reason());
    return;
  }
  for_each_case([](Shape s, const std::vector<float>& a, bool ta, const std::vector<float>& b,
                   bool tb, bool accumulate, std::vector<float>& c, std::size_t ldc) {
    std::vector<std::uint16_t> a16(a.size() + 1), b16(b.size() + 1);  // (+1: never empty)
    kernels::to_bf16(a.data(), a.size(), a16.data());
    kernels::to_bf16(b.data(), b.size(), b16.data());
    for (float alpha : {1.f, -0.1f / 32}) {
      CAPTURE(alpha);
      std::vector<float> got = c;
      std::vector<double> want(c.begin(), c.end()), bound;
      reference(s.m, s.n, s.k, alpha, a16, ta, b16, tb, accumulate, want, ldc, bound);
      kernels::gemm(s.m, s.n, s.k, view<Bf16Matrix>(a16, s.m, s.k, ta),
                    view<Bf16Matrix>(b16, s.k, s.n, tb), accumulate, got.data(), ldc, alpha);
      CHECK(outside(got, want, bound) == 0);
    }
  });
}

TEST_CASE("bf16 products refuse where the CPU has no AVX512-BF16") {
  if (kernels::bf16_supported()) {
    CHECK(kernels::bf16_unsupported_reason().empty());
    return;
  }
  CHECK(!kernels::bf16_unsupported_reason().empty());
  const std::uint16_t one = kernels::bf16::round(1.f);
  float c = 0;
  CHECK_THROWS_AS(kernels::gemm(1, 1, 1, Bf16Matrix{&one, 1, 1}, Bf16Matrix{&one, 1, 1}, false, &c, 1),
                  std::logic_error);
}

// Our AMX tiles: every epilogue (store, store transposed, add times alpha into a
// live C in whole lanes) on packed operands, against the same reference.
TEST_CASE("bf16 tile products match the sums of the rounded operands' products" * doctest::test_suite("amx")) {
  if (!kernels::bf16::available()) {
    test::skip(kernels::bf16::unavailable_reason());
    return;
  }
  namespace bf = kernels::bf16;
  Rng rng(11);
  int checked = 0;
  for (Shape s : kShapes)
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
          std::vector<std::uint16_t> a16(a.size()), b16(b.size());
          for (std::size_t i = 0; i < a.size(); ++i) a16[i] = bf::round(a[i]);
          for (std::size_t i = 0; i < b.size(); ++i) b16[i] = bf::round(b[i]);
          // C is m x n, or n x m stored transposed; rows padded by 3 floats.
          const std::size_t rows = tc ? s.n : s.m, ldc = (tc ? s.m : s.n) + 3;
          auto c = random(rows * ldc, rng);
          const float alpha = add ? -0.25f : 1.f;
          std::vector<double> prod(s.m * s.n, 0.0), bound;
          reference(s.m, s.n, s.k, alpha, a16, ta, b16, tb, false, prod, s.n, bound);
          std::vector<double> want(c.begin(), c.end()), within(c.size(), 0.0);
          for (std::size_t i = 0; i < s.m; ++i)
            for (std::size_t j = 0; j < s.n; ++j) {
              const std::size_t o = tc ? j * ldc + i : i * ldc + j;
              want[o] = (add ? want[o] : 0.0) + prod[i * s.n + j];
              // the add into C: one more rounding of what it sums
              within[o] = bound[i * s.n + j] + 2 * std::ldexp(std::abs(want[o]) + std::abs(c[o]), -24);
            }
          bf::Packed pa, pb;
          const Matrix va = view<Matrix>(a, s.m, s.k, ta), vb = view<Matrix>(b, s.k, s.n, tb);
          bf::pack_a(s.m, s.k, va.data, va.rs, va.cs, pa);
          bf::pack_b(s.k, s.n, vb.data, vb.rs, vb.cs, pb);
          bf::gemm(s.m, s.n, s.k, pa.data(), pb.data(), c.data(), ldc, e, alpha);
          CHECK(outside(c, want, within) == 0);
          ++checked;
        }
  CHECK(checked == 13 * 12);
}

TEST_CASE("bf16 packing of a live source needs unit column stride; padding is zero" * doctest::test_suite("amx")) {
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

TEST_CASE("bf16 packs of byte rows equal the packs of the rows widened to floats" * doctest::test_suite("amx")) {
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
