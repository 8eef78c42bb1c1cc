// Sparse linear models: w·x + b with logistic, hinge (linear SVM) or squared loss.
// Targets are 0/1 for logistic and hinge; squared loss fits ±1 on binary labels and
// the raw label otherwise. Optional L2 on w (not b), applied lazily to the
// coordinates each example touches.
#pragma once

#include "hogwild/model_base.hpp"

namespace hogwild {

enum class LinearLoss : std::uint8_t { logistic, hinge, squared };

class LinearModel : public ModelBase<LinearModel> {
 public:
  LinearModel(LinearLoss loss, const ModelOptions& options) : loss_(loss), options_(options) {}

  std::string name() const override;
  LabelKind label_kind() const override {
    return loss_ == LinearLoss::squared ? LabelKind::binary_or_real : LabelKind::binary;
  }
  void configure(const Problem& problem) override;
  std::vector<TensorSpec> parameters() const override;

  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr);
  void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
  // logistic: P(negative), P(positive); hinge and squared: the score w·x + b.
  std::size_t outputs() const override { return classification_ && loss_ == LinearLoss::logistic ? 2 : 1; }
  void predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const override;
  // w: the features present in the (sparse) rows, as runs of consecutive features.
  Ranges trained_ranges(std::size_t tensor, const Dataset& train, std::size_t begin_row,
                        std::size_t end_row) const override;
  // w: the features of the batch's sparse rows (a dense row: not listed).
  bool touched(std::size_t tensor, const Batch& b, std::vector<std::uint32_t>& keys) const override;
  bool reports_accuracy() const { return classification_; }
  bool feature_indexed() const noexcept override { return true; }
  // logistic: sigma'(z) <= 1/4; squared: 1; hinge, piecewise linear, has none, and
  // takes squared loss's 1: its steps stop once the margins clear, which settles a
  // copy no slower than a curved loss of that figure would.
  double margin_curvature() const noexcept override { return loss_ == LinearLoss::logistic ? 0.25 : 1.0; }

  // Loss and dloss/dz at margin z for target y (after the model's target mapping).
  void loss_and_slope(float z, float y, float& loss, float& slope) const noexcept;
  // What a step of another implementation (the GPU's kernels) must compute alike.
  LinearLoss loss() const noexcept { return loss_; }
  const ModelOptions& options() const noexcept { return options_; }
  // Squared loss on 0/1 labels regresses on -1/+1.
  bool signed_targets() const noexcept { return loss_ == LinearLoss::squared && classification_; }

 private:
  LinearLoss loss_;
  ModelOptions options_;
  std::size_t features_ = 0;
  bool classification_ = true;
  std::vector<float> slopes_;  // per-batch scratch (private to each worker process)
};

}  // namespace hogwild
