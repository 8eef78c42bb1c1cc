#include "hogwild/update_policy.hpp"

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
// and stores on the shared mapping. Kept out of line so tests/tsan.supp can name it.
void dense_axpy_shared(float* dst, float a, const float* x, std::size_t n) noexcept {
  std::size_t i = 0;
  const v4f va = {a, a, a, a};
  for (; i + 8 <= n; i += 8) {
    v4f d0 = vload(dst + i) + va * vload(x + i);
    v4f d1 = vload(dst + i + 4) + va * vload(x + i + 4);
    vstore(dst + i, d0);
    vstore(dst + i + 4, d1);
  }
  for (; i < n; ++i) relaxed_store(dst + i, relaxed_load(dst + i) + a * x[i]);
}

float dense_dot_shared(const float* w, const float* x, std::size_t n) noexcept {
  std::size_t i = 0;
  v4f s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
  for (; i + 8 <= n; i += 8) {
    s0 += vload(w + i) * vload(x + i);
    s1 += vload(w + i + 4) * vload(x + i + 4);
  }
  v4f s = s0 + s1;
  float r = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) r += relaxed_load(w + i) * x[i];
  return r;
}

}  // namespace detail
}  // namespace hogwild
