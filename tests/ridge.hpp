// A user-defined model for the tests, written only against the public API:
// least-squares regression on the row's features, its own parameter name. `Hook`
// sees every row after its update (tests use it to crash a worker or poison weights).
#pragma once

#include "hogwild/model_base.hpp"
#include "hogwild/rng.hpp"

namespace hogwild::test {

struct NoHook {
  void operator()(std::uint32_t, const ParamSet&) const {}
};

template <class Hook = NoHook>
class Ridge : public ModelBase<Ridge<Hook>> {
 public:
  explicit Ridge(Hook hook = {}) : hook_(hook) {}
  std::string name() const override { return "ridge"; }
  LabelKind label_kind() const override { return LabelKind::real; }
  void configure(const Problem& p) override { d_ = p.features; }
  std::vector<TensorSpec> parameters() const override { return {{"theta", d_, {}}}; }
  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr) {
    double loss = 0;
    for (std::size_t i = 0; i < b.size; ++i) {
      const float r = row_dot<U>(p.data(0), b.row(i)) - b.target(i);
      loss += 0.5 * r * r;
      row_descend<U>(p[0], 0, r / static_cast<float>(b.size), 0, b.row(i), lr);
      hook_(b.rows[i], p);
    }
    return loss;
  }
  void predict(const ParamSet& p, RowView x, float y, double& loss, bool& ok) const {
    const float r = row_dot<SerialUpdate>(p.data(0), x) - y;
    loss = 0.5 * r * r;
    ok = false;
  }
  bool reports_accuracy() const { return false; }
  // Its own per-row prediction (load_model's Predictor uses it): theta . x.
  std::size_t outputs() const override { return 1; }
  void predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const override {
    for (const RowView& x : rows) *out++ = row_dot<SerialUpdate>(p.data(0), x);
  }

 private:
  Hook hook_;
  std::size_t d_ = 0;
};

// y = 2 x0 - x1 on `n` dense rows of standard normal features.
inline Dataset linear_data(std::size_t n) {
  std::vector<float> labels, values;
  Rng rng(4);
  for (std::size_t i = 0; i < n; ++i) {
    const float a = static_cast<float>(rng.normal()), b = static_cast<float>(rng.normal());
    values.push_back(a);
    values.push_back(b);
    labels.push_back(2 * a - b);
  }
  return Dataset::dense(labels, values, 2, "linear");
}

}  // namespace hogwild::test
