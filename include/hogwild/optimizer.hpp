// Optimisers: how a gradient becomes a parameter change. A model's step reports
// gradients through U::descend / U::descend_axpy, where U = Update<Race, Opt>
// combines an update mode (update_policy.hpp: how shared floats are read and
// written) with an optimiser (below: what is written). Optimiser state, such as
// AdaGrad's accumulators, lives in the arena next to the parameters and is shared
// by every worker — the same lock-free contract as the weights themselves.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

#include "hogwild/model.hpp"
#include "hogwild/update_policy.hpp"

namespace hogwild {

enum class Optimizer : std::uint8_t { sgd, adagrad };

std::string_view to_string(Optimizer o) noexcept;
// Throws ConfigError naming the valid optimisers.
Optimizer parse_optimizer(std::string_view s);

// Does this optimiser keep a state tensor (the same size) per parameter tensor?
constexpr bool has_state(Optimizer o) noexcept { return o == Optimizer::adagrad; }

namespace detail {
// AdaGrad on a shared dense block, vectorised like dense_axpy_shared (THE INTENDED
// RACE): G[i] += g^2; w[i] -= lr * g / (sqrt(G[i]) + eps), g = a * x[i].
__attribute__((noinline)) void dense_adagrad_shared(float* w, float* G, float a, const float* x,
                                                    std::size_t n, float lr, float eps) noexcept;
}  // namespace detail

// Plain SGD: w -= lr * g. No state.
struct Sgd {
  static constexpr Optimizer kind = Optimizer::sgd;
  template <class Race>
  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    Race::add(t.data + i, -lr * g);
  }
  template <class Race>
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    Race::axpy(t.data + offset, -lr * a, x, n);
  }
};

// AdaGrad (Duchi et al. 2011): G += g^2; w -= lr * g / (sqrt(G) + eps), per
// coordinate. G is shared: under hogwild two workers may each lose the other's
// g^2, exactly as they may lose each other's weight update; under atomic both
// adds are atomic read-modify-writes.
struct AdaGrad {
  static constexpr Optimizer kind = Optimizer::adagrad;
  static constexpr float eps = 1e-7f;
  template <class Race>
  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    float* G = t.state + i;
    Race::add(G, g * g);
    Race::add(t.data + i, -lr * g / (std::sqrt(Race::read(G)) + eps));
  }
  template <class Race>
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    if constexpr (Race::mode == Mode::atomic) {
      for (std::size_t k = 0; k < n; ++k) descend<Race>(t, offset + k, a * x[k], lr);
    } else {
      detail::dense_adagrad_shared(t.data + offset, t.state + offset, a, x, n, lr, eps);
    }
  }
};

// What a model's step<U> receives: the mode's raw accesses (read, add, dot, axpy)
// plus the optimiser's descend calls. Models report gradients through descend so
// that every optimiser applies to them; raw add/axpy remain for non-gradient writes.
template <class Race, class Opt>
struct Update : Race {
  using race = Race;
  static constexpr Optimizer optimizer = Opt::kind;
  // Apply gradient g to coordinate i of tensor t.
  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    Opt::template descend<Race>(t, i, g, lr);
  }
  // Apply gradient a * x[k] to coordinate offset + k of tensor t, for k < n.
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    Opt::template descend_axpy<Race>(t, offset, a, x, n, lr);
  }
};

// Calls f.template operator()<U>() with the Update type for (mode, optimizer): the
// one place where the runtime choice becomes a compile-time type.
template <class F>
decltype(auto) dispatch_update(Mode mode, Optimizer opt, F&& f) {
  auto with_opt = [&]<class Opt>() -> decltype(auto) {
    switch (mode) {
      case Mode::serial: return f.template operator()<Update<SerialUpdate, Opt>>();
      case Mode::hogwild: return f.template operator()<Update<HogwildUpdate, Opt>>();
      case Mode::atomic: return f.template operator()<Update<AtomicUpdate, Opt>>();
      case Mode::lock: break;
    }
    return f.template operator()<Update<LockUpdate, Opt>>();
  };
  if (opt == Optimizer::adagrad) return with_opt.template operator()<AdaGrad>();
  return with_opt.template operator()<Sgd>();
}

// Explicit instantiations of a model's out-of-line step for every (mode, optimiser).
#define HOGWILD_INSTANTIATE_STEP(Model)                                                   \
  template double Model::step<::hogwild::Update<::hogwild::SerialUpdate, ::hogwild::Sgd>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::HogwildUpdate, ::hogwild::Sgd>>(\
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::AtomicUpdate, ::hogwild::Sgd>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::LockUpdate, ::hogwild::Sgd>>(   \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::SerialUpdate, ::hogwild::AdaGrad>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::HogwildUpdate, ::hogwild::AdaGrad>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::AtomicUpdate, ::hogwild::AdaGrad>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::LockUpdate, ::hogwild::AdaGrad>>( \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float)

// Shorthand for tests and code that want the plain serial SGD step.
using SerialSgd = Update<SerialUpdate, Sgd>;

}  // namespace hogwild
