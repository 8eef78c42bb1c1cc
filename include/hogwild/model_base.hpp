// ModelBase<Derived> turns a model's one templated gradient step into every
// access policy. A model writes
//
//   template <class U> double step(const Batch& b, const ParamSet& p, float lr);
//   void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
//
// where U = Update<policy, optimizer> (optimizer.hpp): U::read, U::dot,
// U::sparse_dot for reading the weights, U::descend, U::descend_axpy,
// U::descend_row and U::descend_block for reporting gradients; `step` returns the
// batch's summed loss. The model knows nothing of workers, locks, replicas or
// progress: the trainer's step loop (src/trainer/step_loop.cpp) calls train_batch
// once per mini-batch, which calls the step compiled for the mode's policy (one
// indirect call per batch; no virtual call or allocation per example).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "hogwild/gradient.hpp"
#include "hogwild/model.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/prefetch.hpp"

namespace hogwild {

namespace detail {
#define HOGWILD_ACCESS_TYPE_(P, unused) , P
template <class... P>
struct AccessList {};
using Accesses = AccessList<void HOGWILD_ACCESS_POLICIES(HOGWILD_ACCESS_TYPE_, )>;  // [0] unused
#undef HOGWILD_ACCESS_TYPE_

template <class P, class First, class... Rest>
constexpr std::uint8_t index_in(AccessList<First, Rest...>) noexcept {
  if constexpr (std::is_same_v<P, First>) return 0;
  else return 1 + index_in<P>(AccessList<Rest...>{});
}
}  // namespace detail

// The index of access policy P in HOGWILD_ACCESS_POLICIES (StepKind::access).
template <class P>
constexpr std::uint8_t access_index() noexcept {
  return static_cast<std::uint8_t>(detail::index_in<P>(detail::Accesses{}) - 1);
}

template <class Derived>
class ModelBase : public Model {
 public:
  double train_batch(StepKind kind, const Batch& batch, const ParamSet& params,
                     float lr) final {
    const auto& t = steps();
    return t[kind.optimizer * (t.size() / 2) + kind.access](derived(), batch, params, lr);
  }

  Evaluation evaluate(const ParamSet& params, const Dataset& data,
                      const float* targets) const override {
    check_rows(data);
    Evaluation e;
    e.rows = data.rows();
    if (data.rows() == 0) return e;
    double loss = 0;
    std::size_t correct = 0;
    for (std::size_t r = 0; r < data.rows(); ++r) {
      double l = 0;
      bool ok = false;
      derived().predict(params, data.row(r), targets[r], l, ok);
      loss += l;
      correct += ok;
    }
    const double n = static_cast<double>(data.rows());
    e.loss = loss / n;
    if (derived().reports_accuracy())
      e.accuracy = static_cast<double>(correct) / n;
    else
      e.rmse = std::sqrt(2.0 * e.loss);  // regression loss is (z - y)^2 / 2
    return e;
  }

  // Classification models report accuracy; regression ones RMSE.
  bool reports_accuracy() const { return true; }

 private:
  Derived& derived() { return static_cast<Derived&>(*this); }
  const Derived& derived() const { return static_cast<const Derived&>(*this); }

  using Step = double (*)(Derived&, const Batch&, const ParamSet&, float);
  template <class U>
  static double call(Derived& d, const Batch& b, const ParamSet& p, float lr) {
    return d.template step<U>(b, p, lr);
  }
  // [optimizer * policies + access]: every policy with sgd, then with adagrad.
  template <class... P>
  static constexpr auto table(detail::AccessList<void, P...>) {
    return std::array<Step, 2 * sizeof...(P)>{&call<Update<P, Sgd>>...,
                                              &call<Update<P, AdaGrad>>...};
  }
  static const auto& steps() {
    static constexpr auto t = table(detail::Accesses{});
    return t;
  }
};

// Row kernels shared by the linear models: one branch per row on dense vs sparse.
template <class U>
inline float row_dot(const float* w, RowView x) noexcept {
  if (x.dense()) return U::dot(w, x.value, x.nnz);
  return U::sparse_dot(w, x.index, x.value, x.nnz);
}

// Applies the gradient a * x (+ l2 * w on the coordinates x touches: the "lazy" L2
// of sparse SGD) to the block of tensor w starting at `offset`: U::descend_row.
template <class U>
inline void row_descend(const ParamSet::Tensor& w, std::size_t offset, float a, float l2,
                        RowView x, float lr) noexcept {
  U::descend_row(w, offset, a, l2, x, lr);
}

}  // namespace hogwild

// Explicit instantiations of a model's out-of-line step for every access policy and
// optimiser (HOGWILD_ACCESS_POLICIES): one line per model, whatever modes exist.
#define HOGWILD_STEP_INSTANCES_(P, Model)                                                 \
  template double Model::step<::hogwild::Update<::hogwild::P, ::hogwild::Sgd>>(           \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);                        \
  template double Model::step<::hogwild::Update<::hogwild::P, ::hogwild::AdaGrad>>(       \
      const ::hogwild::Batch&, const ::hogwild::ParamSet&, float);
#define HOGWILD_INSTANTIATE_STEP(Model) \
  HOGWILD_ACCESS_POLICIES(HOGWILD_STEP_INSTANCES_, Model) static_assert(true, "")
