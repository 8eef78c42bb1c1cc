// Small deterministic random numbers (xoshiro256**, seeded by splitmix64): the same
// seed gives the same shuffles and initial weights with every standard library,
// which std:: distributions do not promise.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>

namespace hogwild {

// splitmix64's output function: every input bit reaches every output bit (also a
// hash: the row permutation's rounds, ps's hashed key ranges).
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t kGolden64 = 0x9e3779b97f4a7c15ULL;

inline std::uint64_t splitmix64(std::uint64_t& s) noexcept { return mix64(s += kGolden64); }

class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() noexcept {
    const std::uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
  std::uint64_t below(std::uint64_t n) noexcept {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  double normal() noexcept {
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  template <class T>
  void shuffle(std::span<T> a) noexcept {
    for (std::size_t i = a.size(); i > 1; --i) std::swap(a[i - 1], a[below(i)]);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace hogwild
