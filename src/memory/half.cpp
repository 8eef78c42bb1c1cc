#include "memory/half.hpp"

#include <bit>
#include <cmath>

namespace hogwild::detail {

std::uint16_t float_to_half(float x) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t a = bits & 0x7fffffffu;
  if (a >= 0x7f800000u)  // infinity, or NaN (kept quiet, with its payload's top bits)
    return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65,520 (half-way past 65,504) and up
  std::uint32_t q, rem, halfway;
  if (a >= 0x38800000u) {  // 2^-14 and up: a normal half; the exponent rebiased by 127 - 15
    q = (a - 0x38000000u) >> 13;
    rem = a & 0x1fffu;
    halfway = 0x1000u;
  } else {  // a subnormal half (or zero): units of 2^-24
    const std::uint32_t e = a >> 23;
    if (e < 102) return sign;  // below 2^-25, or 2^-25 itself (a tie, to the even zero)
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 to 24
    q = m >> shift;
    rem = m & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  }
  // A carry out of the mantissa moves to the next binade (or to infinity), as it must.
  q += rem > halfway || (rem == halfway && (q & 1u));
  return static_cast<std::uint16_t>(sign | q);
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e) return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
  const float sub = std::ldexp(static_cast<float>(m), -24);  // exact: m < 2^10
  return sign ? -sub : sub;
}

void halves_to_floats(const std::uint16_t* src, std::size_t n, float* dst) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void floats_to_halves(const float* src, std::size_t n, std::uint16_t* dst) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace hogwild::detail
