// Number and token helpers shared by the text readers (libsvm, ratings): a fast
// exact path for short decimals, std::from_chars for the rest, and quoting of
// input for error messages.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace hogwild::detail {

// Quotes a piece of the input for an error message: short and printable.
inline std::string quote(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string q = "\"";
  for (char c : s.substr(0, kMax))
    q += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) ? c : '?';
  if (s.size() > kMax) q += "...";
  return q + "\"";
}

enum class NumError { none, syntax, range, not_finite };

// The common case, short decimals such as "0.0854358" or "-1": at most 9 digits,
// at most 10 after the point, no exponent, and the digits as an integer m < 2^24.
// Then m and 10^k are exact floats and m / 10^k is one correctly rounded IEEE
// division: the same float std::from_chars returns, for much less work.
inline bool parse_short_decimal(const char* p, const char* e, float& out) noexcept {
  static constexpr float kPow10[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                     1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
  const bool negative = p != e && *p == '-';
  p += negative;
  std::uint32_t m = 0;
  int digits = 0, frac = 0;
  for (; p != e && static_cast<unsigned>(*p - '0') < 10 && digits < 9; ++p, ++digits)
    m = m * 10 + static_cast<unsigned>(*p - '0');
  if (p != e && *p == '.') {
    for (++p; p != e && static_cast<unsigned>(*p - '0') < 10 && digits < 9; ++p, ++digits, ++frac)
      m = m * 10 + static_cast<unsigned>(*p - '0');
  }
  if (p != e || digits == 0 || frac > 10 || m > (1u << 24)) return false;
  float v = static_cast<float>(m) / kPow10[frac];
  out = negative ? -v : v;
  return true;
}

// std::from_chars, plus what real files contain: a leading '+', and values below
// float's range (1e-50), which become 0 as they would through strtof.
inline NumError parse_float(const char* b, const char* e, float& out) noexcept {
  if (b != e && *b == '+') {
    ++b;
    if (b != e && *b == '-') return NumError::syntax;
  }
  if (parse_short_decimal(b, e, out)) return NumError::none;
  auto [p, ec] = std::from_chars(b, e, out);
  if (p != e) return NumError::syntax;
  if (ec == std::errc::result_out_of_range) {
    double d;
    auto [pd, ecd] = std::from_chars(b, e, d);
    if (ecd != std::errc() || !(std::fabs(d) < 1.0)) return NumError::range;
    out = static_cast<float>(std::copysign(0.0, d));
    return NumError::none;
  }
  if (ec != std::errc()) return NumError::syntax;
  if (!std::isfinite(out)) return NumError::not_finite;
  return NumError::none;
}

}  // namespace hogwild::detail
