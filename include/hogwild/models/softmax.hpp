// Multinomial softmax regression: K classes, weights W (K rows of the feature
// dimension, each row padded to a 64-byte multiple so dense rows are aligned
// blocks) and a bias per class; cross-entropy loss; optional L2 on W.
#pragma once

#include "hogwild/model_base.hpp"

namespace hogwild {

class SoftmaxModel : public ModelBase<SoftmaxModel> {
 public:
  explicit SoftmaxModel(const ModelOptions& options) : options_(options) {}

  std::string name() const override { return "softmax"; }
  LabelKind label_kind() const override { return LabelKind::multiclass; }
  void configure(const Problem& problem) override;
  std::vector<TensorSpec> parameters() const override;

  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr);
  void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
  std::size_t outputs() const override { return classes_; }  // each class's probability
  void predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const override;
  bool reads_byte_rows() const noexcept override { return true; }
  // W on sparse rows: every class's weights of the batch's features (a sparse row's
  // step, its L2 included, changes only those). Dense rows and the biases: the
  // whole tensor.
  bool touched(std::size_t tensor, const Batch& b,
               std::vector<std::uint32_t>& keys) const override;

  // The batch's probabilities and their scaled copy (step()).
  StepMemory step_memory(std::size_t batch, bool) const override {
    const std::size_t bytes = 2 * batch * classes_ * sizeof(float);
    return {bytes, bytes};
  }
  std::size_t classes() const noexcept { return classes_; }
  std::size_t stride() const noexcept { return stride_; }
  const ModelOptions& options() const noexcept { return options_; }

 private:
  // logits[k] = W_k · x + b_k
  template <class U>
  void logits(const float* W, const float* bias, RowView x, float* out) const;
  // In place: logits -> probabilities; returns -log p[target].
  float softmax_loss(float* z, std::size_t target) const;

  ModelOptions options_;
  std::size_t features_ = 0, classes_ = 0, stride_ = 0;
  std::vector<float> scratch_;  // per-batch probabilities, private to each worker
  std::vector<float> coeff_;    // alpha times scratch_ (U::descend_block's product)
  std::vector<const float*> rows_;     // the batch's dense rows
  std::vector<const std::uint8_t*> byte_rows_;  // or its byte rows (dense_u8)
};

}  // namespace hogwild
