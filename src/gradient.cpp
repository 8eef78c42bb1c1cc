#include "hogwild/gradient.hpp"

#include <algorithm>

namespace hogwild {

void apply_gradient(const ParamSet& params, Optimizer optimizer, float lr) {
  for (const auto& t : params.tensors()) {
    if (!t.grad) continue;
    if (optimizer == Optimizer::adagrad) {
      // The dense AdaGrad kernel with a = 1: g = grad exactly, as the direct step's g.
      detail::dense_adagrad_shared(t.data, t.state, 1.f, t.grad, t.size, lr, AdaGrad::eps);
    } else {
      for (std::size_t i = 0; i < t.size; ++i) t.data[i] += t.grad[i];  // -lr g, rounded
    }
    std::fill(t.grad, t.grad + t.size, 0.f);
  }
}

}  // namespace hogwild
