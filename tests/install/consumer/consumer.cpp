// A program outside the source tree, built against an installed hogwild (headers,
// libhogwild and hogwild.pc only): trains a user-defined model and a built-in one
// with 2 Hogwild! workers and exits 0 only when both learned the hidden rule.
#include <hogwild/config.hpp>
#include <hogwild/model_base.hpp>
#include <hogwild/trainer.hpp>

#include <cstdio>
#include <vector>

namespace {

// Least squares through the public model API.
class Ridge : public hogwild::ModelBase<Ridge> {
 public:
  std::string name() const override { return "consumer-ridge"; }
  hogwild::LabelKind label_kind() const override { return hogwild::LabelKind::real; }
  void configure(const hogwild::Problem& p) override { d_ = p.features; }
  std::vector<hogwild::TensorSpec> parameters() const override { return {{"theta", d_, {}}}; }
  template <class U>
  double step(const hogwild::Batch& b, const hogwild::ParamSet& p, float lr) {
    double loss = 0;
    for (std::size_t i = 0; i < b.size; ++i) {
      const float r = hogwild::row_dot<U>(p.data(0), b.row(i)) - b.target(i);
      loss += 0.5 * r * r;
      hogwild::row_descend<U>(p[0], 0, r, 0, b.row(i), lr);
    }
    return loss;
  }
  void predict(const hogwild::ParamSet& p, hogwild::RowView x, float y, double& loss,
               bool& ok) const {
    const float r = hogwild::row_dot<hogwild::SerialUpdate>(p.data(0), x) - y;
    loss = 0.5 * r * r;
    ok = false;
  }
  bool reports_accuracy() const { return false; }

 private:
  std::size_t d_ = 0;
};

}  // namespace

int main() {
  std::vector<float> labels, values;
  for (int i = 0; i < 4000; ++i) {
    const float a = static_cast<float>(i % 97) / 97.f, b = static_cast<float>(i % 89) / 89.f;
    values.insert(values.end(), {a, b});
    labels.push_back(2 * a - b);  // regression target; its sign is the class below
  }
  const auto data = hogwild::Dataset::dense(labels, values, 2, "consumer");
  hogwild::TrainConfig cfg;
  cfg.workers = 2;
  cfg.epochs = 20;
  cfg.step_size.lr0 = 0.2f;
  Ridge ridge;
  const auto r = hogwild::train(cfg, ridge, data, &data);
  const auto& theta = r.parameters.at("theta");
  std::printf("hogwild %s: theta = (%.3f, %.3f), test rmse %.4f\n", HOGWILD_VERSION, theta[0],
              theta[1], r.test.rmse);
  const bool ok = theta[0] > 1.9f && theta[0] < 2.1f && theta[1] < -0.9f && theta[1] > -1.1f;
  return ok ? 0 : 1;
}
