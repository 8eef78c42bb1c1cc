// The gradient path: a step whose gradients land in a worker-private buffer
// instead of the weights (what DDP's all-reduce and a parameter server's push
// need). A mode takes it by naming GradientCapture as its access policy; the
// model's step is the same code that trains in every other mode.
//
// Each tensor's `grad` (ParamSet::Tensor) is the buffer, the tensor's shape. A
// captured step adds to it, per coordinate, what the optimiser consumes: for SGD
// the step -lr g (rounded as the direct write rounds it), for AdaGrad the gradient
// g. apply_gradient() then does what the direct step would have done: for a step
// that changes each coordinate once (one row, or rows with disjoint coordinates,
// and no L2 on the dense models' weights) the result is bit for bit the weights a
// serial step leaves (tests/test_gradient.cpp); otherwise it is the same update
// with the per-coordinate parts summed first.
#pragma once

#include "hogwild/optimizer.hpp"

namespace hogwild {

// Reads are plain: the step's parameters are the worker's own (a replica) or
// change only between steps.
struct GradientCapture : VectorReads {
  static constexpr bool concurrent_writers = false;
  static constexpr bool shared_memory = false;
  static constexpr bool plain_adds = false;
  static float read(const float* p) noexcept { return *p; }
};

template <class Opt>
struct Update<GradientCapture, Opt> : GradientCapture {
  using access = GradientCapture;
  static constexpr Optimizer optimizer = Opt::kind;

  static bool live(const ParamSet&) noexcept { return false; }

  static void descend(const ParamSet::Tensor& t, std::size_t i, float g, float lr) noexcept {
    t.grad[i] += Opt::input(g, lr);
  }
  static void descend_axpy(const ParamSet::Tensor& t, std::size_t offset, float a, const float* x,
                           std::size_t n, float lr) noexcept {
    float* d = t.grad + offset;
    if constexpr (Opt::kind == Optimizer::sgd) {
      const float step = -lr * a;  // as Sgd::descend_axpy scales x
      for (std::size_t k = 0; k < n; ++k) d[k] += detail::opaque(step * x[k]);
    } else {
      for (std::size_t k = 0; k < n; ++k) d[k] += detail::opaque(a * x[k]);
    }
  }
  static void descend_row(const ParamSet::Tensor& w, std::size_t offset, float a, float l2,
                          RowView x, float lr) noexcept {
    detail::descend_row_each<Update>(w, offset, a, l2, x, lr);
  }
  template <class Product>
  static void descend_block(const ParamSet::Tensor& t, Block b, float scale, float l2, float lr,
                            Product&& product) {
    if constexpr (Opt::kind == Optimizer::sgd) {  // the product's own rounding, as in place
      const float step = -lr * scale;
      if (l2 != 0)
        for (std::size_t r = 0; r < b.rows; ++r)
          descend_axpy(t, b.offset + r * b.ld, scale * l2, t.data + b.offset + r * b.ld, b.cols, lr);
      product(t.grad + b.offset, step, false, false);
    } else {
      detail::descend_block_rows<Update>(t, b, scale, l2, lr, product);
    }
  }
};

// Applies every tensor's captured `grad` to its weights with the optimiser (plain
// accesses: the caller owns the weights, or holds what excludes other writers),
// then zeroes the buffers for the next step. lr: AdaGrad's step size (SGD's is in
// the buffer already).
void apply_gradient(const ParamSet& params, Optimizer optimizer, float lr);

}  // namespace hogwild
