// IEEE binary16 on the host (memory/half.hpp): what --factors fp16 stores on the GPU,
// converted wherever the host reads or writes it. Checked exhaustively: every half
// widens to its exact value and rounds back to itself, and every float between two
// neighbouring halves rounds to the nearer (ties to the even one), as the GPU's
// __float2half_rn does.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "memory/half.hpp"

using namespace hogwild::detail;

namespace {

bool is_nan_half(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

}  // namespace

TEST_CASE("known halves widen to their values") {
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0xc000) == -2.0f);
  CHECK(half_to_float(0x7bff) == 65504.0f);
  CHECK(half_to_float(0x0400) == std::ldexp(1.0f, -14));  // the smallest normal
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(half_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(half_to_float(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(half_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::signbit(half_to_float(0x8000)));
  CHECK(half_to_float(0x8000) == 0.0f);
  CHECK(std::isnan(half_to_float(0x7e00)));
  CHECK(float_to_half(0.1f) == 0x2e66);  // 0.0999755859375, the nearer of 0x2e66 and 0x2e67
}

TEST_CASE("every half widens exactly and rounds back to itself") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto x = static_cast<std::uint16_t>(h);
    const float f = half_to_float(x);
    if (is_nan_half(x)) {
      CHECK(std::isnan(f));
      CHECK(is_nan_half(float_to_half(f)));  // NaN stays NaN (quieted)
      continue;
    }
    REQUIRE(float_to_half(f) == x);
  }
}

TEST_CASE("every float between neighbouring halves rounds to the nearer, ties to the even one") {
  for (std::uint32_t h = 0; h < 0x7bff; ++h) {  // the positive finite halves and their successor
    const auto lo = static_cast<std::uint16_t>(h), hi = static_cast<std::uint16_t>(h + 1);
    const float a = half_to_float(lo), b = half_to_float(hi);
    REQUIRE(a < b);  // widening keeps the order
    const float mid = a + (b - a) / 2;  // exact: halves have 11 significant bits, floats 24
    REQUIRE(mid > a);
    REQUIRE(mid < b);
    const std::uint16_t even = (lo & 1u) ? hi : lo;
    CHECK(float_to_half(mid) == even);
    CHECK(float_to_half(std::nextafter(mid, 0.0f)) == lo);
    CHECK(float_to_half(std::nextafter(mid, 1e9f)) == hi);
    CHECK(float_to_half(-mid) == (even | 0x8000u));  // the same for the negatives
    CHECK(float_to_half(-std::nextafter(mid, 1e9f)) == (hi | 0x8000u));
  }
}

TEST_CASE("beyond the halves: overflow to infinity, underflow to a signed zero") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(float_to_half(std::nextafter(65520.0f, 0.0f)) == 0x7bff);  // under the midpoint: 65504
  CHECK(float_to_half(65520.0f) == 0x7c00);  // the tie goes to the even: infinity
  CHECK(float_to_half(1e9f) == 0x7c00);
  CHECK(float_to_half(-1e9f) == 0xfc00);
  CHECK(float_to_half(inf) == 0x7c00);
  CHECK(float_to_half(-inf) == 0xfc00);
  CHECK(float_to_half(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // a tie between 0 and 2^-24
  CHECK(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(float_to_half(1e-10f) == 0x0000);
  CHECK(float_to_half(-1e-10f) == 0x8000);
  CHECK(float_to_half(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(is_nan_half(float_to_half(std::nanf(""))));
  CHECK(is_nan_half(float_to_half(-std::nanf(""))));
}

TEST_CASE("the array conversions are the scalar ones") {
  std::mt19937 rng(7);
  std::vector<float> f(10000);
  for (float& x : f) x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                                    std::uniform_int_distribution<int>(-30, 17)(rng));
  std::vector<std::uint16_t> h(f.size());
  floats_to_halves(f.data(), f.size(), h.data());
  std::vector<float> back(f.size());
  halves_to_floats(h.data(), h.size(), back.data());
  for (std::size_t i = 0; i < f.size(); ++i) {
    REQUIRE(h[i] == float_to_half(f[i]));
    REQUIRE(std::bit_cast<std::uint32_t>(back[i]) == std::bit_cast<std::uint32_t>(half_to_float(h[i])));
  }
}

#ifdef __FLT16_MANT_DIG__
TEST_CASE("the compiler's own _Float16 agrees on a million floats of every magnitude") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    const auto theirs = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
    REQUIRE(float_to_half(x) == theirs);
    REQUIRE(std::bit_cast<std::uint32_t>(half_to_float(theirs)) ==
            std::bit_cast<std::uint32_t>(static_cast<float>(std::bit_cast<_Float16>(theirs))));
  }
}
#endif
