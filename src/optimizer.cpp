#include "hogwild/optimizer.hpp"

#include <vector>

#include "hogwild/error.hpp"

namespace hogwild {

std::string_view to_string(Optimizer o) noexcept {
  switch (o) {
    case Optimizer::sgd: return "sgd";
    case Optimizer::adagrad: return "adagrad";
  }
  return "?";
}

Optimizer parse_optimizer(std::string_view s) {
  for (Optimizer o : {Optimizer::sgd, Optimizer::adagrad})
    if (s == to_string(o)) return o;
  throw ConfigError("unknown optimizer \"" + std::string(s) + "\"; expected sgd or adagrad");
}

namespace detail {

// The dense half of THE INTENDED RACE (update_policy.hpp) for AdaGrad: whole-lane
// vector loads and stores of the shared weights and accumulators. x may alias w
// (the L2 term): each lane of x is loaded before the same lane of w is stored.
void dense_adagrad_shared(float* w, float* G, float a, const float* x, std::size_t n, float lr,
                          float eps) noexcept {
  std::size_t i = 0;
  const v4f va = {a, a, a, a}, vlr = {lr, lr, lr, lr}, veps = {eps, eps, eps, eps};
  for (; i + 4 <= n; i += 4) {
    const v4f g = va * vload(x + i);
    const v4f acc = vload(G + i) + g * g;
    vstore(G + i, acc);
    v4f root;
    for (int k = 0; k < 4; ++k) root[k] = __builtin_sqrtf(acc[k]);
    vstore(w + i, vload(w + i) - vlr * g / (root + veps));
  }
  for (; i < n; ++i) {
    const float g = a * x[i];
    const float acc = relaxed_load(G + i) + g * g;
    relaxed_store(G + i, acc);
    relaxed_store(w + i, relaxed_load(w + i) - lr * g / (__builtin_sqrtf(acc) + eps));
  }
}

float* block_scratch(std::size_t floats) {
  // Per thread: a worker process steps on one thread, tests may on several.
  thread_local std::vector<float> scratch;
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

}  // namespace detail
}  // namespace hogwild
