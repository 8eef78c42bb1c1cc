// Optimisers, and the update interface a model's step is written against.
//
// A step reads the parameters through its access policy U (update_policy.hpp:
// U::read, U::dot, U::sparse_dot) and reports gradients through the descend
// operations below; U = Update<Access, Optimizer> combines how floats are read and
// written with what is written (SGD: w -= lr g; AdaGrad: per-coordinate scaling). A
// step never writes the weights itself, so one step serves every mode, and the
// gradient path (gradient.hpp) can take the gradients instead of applying them.
//   descend(t, i, g, lr)                     gradient g at coordinate i of tensor t
//   descend_axpy(t, offset, a, x, n, lr)     gradient a x[k] at offset + k, k < n
//   descend_row(t, offset, a, l2, x, lr)     gradient a x (a data row) + l2 w on the
//                                            row's coordinates (the lazy L2 of
//                                            sparse SGD) at offset + index
//   descend_block(t, block, scale, l2, lr, product)
//                                            gradient scale (G + l2 w) on a block of
//                                            rows, where product computes G: the
//                                            dense models' mini-batch products
//   U::live(params)                          whether other workers write the
//                                            weights while the step reads them
// Optimiser state, such as AdaGrad's accumulators, lives in the arena next to the
// parameters and is shared by every worker: the same lock-free contract as the
// weights themselves.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hogwild/row_view.hpp"
#include "hogwild/param_set.hpp"
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
// A worker's scratch for one gradient block (descend_block), at least `floats` long.
float* block_scratch(std::size_t floats);
}  // namespace detail

// Plain SGD: w -= lr * g. No state. What it consumes from the gradient path is the
// step itself, -lr g (input()), rounded as the direct write rounds it.
struct Sgd {
  static constexpr Optimizer kind = Optimizer::sgd;
  template <class Race>
  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    Race::add(t.data + i, detail::opaque(-lr * g));
  }
  template <class Race>
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    Race::axpy(t.data + offset, -lr * a, x, n);
  }
  static float input(float g, float lr) noexcept { return detail::opaque(-lr * g); }
};

// AdaGrad (Duchi et al. 2011): G += g^2; w -= lr * g / (sqrt(G) + eps), per
// coordinate. G is shared: under hogwild two workers may each lose the other's
// g^2, exactly as they may lose each other's weight update; under atomic both
// adds are atomic read-modify-writes. The gradient path hands it g itself.
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
    if constexpr (!Race::plain_adds) {  // one read-modify-write per coordinate
      for (std::size_t k = 0; k < n; ++k) descend<Race>(t, offset + k, a * x[k], lr);
    } else {
      detail::dense_adagrad_shared(t.data + offset, t.state + offset, a, x, n, lr, eps);
    }
  }
  static float input(float g, float) noexcept { return g; }
};

// A block of a tensor for descend_block: `rows` rows of `cols` floats, `ld` floats
// apart, from `offset`.
struct Block {
  std::size_t offset = 0, rows = 1, cols = 0, ld = 0;
};

namespace detail {
// The generic forms of descend_row and descend_block, through U's reads and its
// descend / descend_axpy (each policy's Update keeps its fast special cases).
template <class U>
void descend_row_each(const ParamSet::Tensor& w, std::size_t offset, float a, float l2, RowView x,
                      float lr) noexcept {
  if (x.dense()) {
    if (l2 != 0) U::descend_axpy(w, offset, l2, w.data + offset, x.nnz, lr);
    return U::descend_axpy(w, offset, a, x.value, x.nnz, lr);
  }
  const float* base = w.data + offset;
  for (std::uint32_t k = 0; k < x.nnz; ++k) {
    const float g = a * x.value[k];
    U::descend(w, offset + x.index[k], l2 != 0 ? g + l2 * U::read(base + x.index[k]) : g, lr);
  }
}
// G from the product into a scratch block, then row by row (+ l2 w) to descend_axpy.
template <class U, class Product>
void descend_block_rows(const ParamSet::Tensor& t, Block b, float scale, float l2, float lr,
                        Product&& product) {
  const float* w = t.data + b.offset;
  float* g = block_scratch(b.rows * b.ld);
  product(g, 1.f, true, false);
  for (std::size_t r = 0; r < b.rows; ++r) {
    float* gr = g + r * b.ld;
    if (l2 != 0)
      for (std::size_t i = 0; i < b.cols; ++i) gr[i] += l2 * U::read(w + r * b.ld + i);
    U::descend_axpy(t, b.offset + r * b.ld, scale, gr, b.cols, lr);
  }
}
}  // namespace detail

// What a model's step<U> receives: the policy's reads plus the optimiser's descend
// operations (see the top of this file).
template <class Access, class Opt>
struct Update : Access {
  using access = Access;
  static constexpr Optimizer optimizer = Opt::kind;

  // True when other workers write p while the step reads it.
  static bool live(const ParamSet& p) noexcept { return Access::concurrent_writers && !p.exclusive(); }

  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    Opt::template descend<Access>(t, i, g, lr);
  }
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    Opt::template descend_axpy<Access>(t, offset, a, x, n, lr);
  }
  static void descend_row(const ParamSet::Tensor& w, std::size_t offset, float a, float l2,
                          RowView x, float lr) noexcept {
    if (Opt::kind == Optimizer::sgd && !x.dense()) {
      // Sgd::descend spelled out on a local pointer: through descend(w, ...) the
      // compiler reloads w.data after every relaxed store.
      float* d = w.data + offset;
      for (std::uint32_t k = 0; k < x.nnz; ++k) {
        const float g = a * x.value[k];
        Access::add(d + x.index[k],
                    detail::opaque(-lr * (l2 != 0 ? g + l2 * Access::read(d + x.index[k]) : g)));
      }
      return;
    }
    detail::descend_row_each<Update>(w, offset, a, l2, x, lr);
  }
  // product(dst, alpha, overwrite, live) writes (overwrite) or adds alpha * G to
  // the block's shape at dst; live: other processes read or write dst meanwhile.
  // With SGD and plain adds the product adds -lr scale G straight into the weights
  // (after the decay -lr scale l2 w): one pass over them, no gradient buffer. Other
  // optimisers and atomic adds take G from a scratch block, row by row.
  template <class Product>
  static void descend_block(const ParamSet::Tensor& t, Block b, float scale, float l2, float lr,
                            Product&& product) {
    if constexpr (Opt::kind == Optimizer::sgd && Access::plain_adds) {
      float* w = t.data + b.offset;
      const float step = -lr * scale;
      if (l2 != 0)
        for (std::size_t r = 0; r < b.rows; ++r) Access::axpy(w + r * b.ld, step * l2, w + r * b.ld, b.cols);
      product(w, step, false, Access::shared_memory && !t.exclusive);
    } else {
      detail::descend_block_rows<Update>(t, b, scale, l2, lr, product);
    }
  }
};

// Shorthand for tests and code that want the plain serial SGD step.
using SerialSgd = Update<SerialUpdate, Sgd>;

}  // namespace hogwild
