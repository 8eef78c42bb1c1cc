// Multi-layer perceptron: dense layers with ReLU between them and softmax
// cross-entropy on top (--model mlp --hidden 256,128). Layer l has weights W<l>
// (out x in, row-major, He-initialised) and a bias b<l>; optional L2 on the weights.
// A mini-batch runs as matrix products (src/kernels/: oneDNN, or our AMX tiles for
// bf16 where the CPU has them); each weight gradient's product goes to
// U::descend_block, which (with SGD) adds it straight into the weights or takes it
// into a gradient block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hogwild/model_base.hpp"

namespace hogwild {

class MlpModel : public ModelBase<MlpModel> {
 public:
  explicit MlpModel(const ModelOptions& options);

  std::string name() const override { return "mlp"; }
  LabelKind label_kind() const override { return LabelKind::multiclass; }
  void configure(const Problem& problem) override;
  std::vector<TensorSpec> parameters() const override;

  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr);
  void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
  bool reads_byte_rows() const noexcept override { return true; }
  // The first layer's weights on sparse rows without L2: the columns of the batch's
  // features (a feature absent from every row has a zero input, so a zero gradient
  // on its column). Dense rows, L2 and every other tensor: the whole tensor.
  bool touched(std::size_t tensor, const Batch& b,
               std::vector<std::uint32_t>& keys) const override;
  // The batch's activations and deltas, and with live weights each layer's private
  // copy and the largest layer's product (step()); oneDNN's own besides.
  StepMemory step_memory(std::size_t batch, bool live) const override;
  // Batched forward passes (one row at a time would be a matrix-vector product).
  Evaluation evaluate(const ParamSet& params, const Dataset& data,
                      const float* targets) const override;
  std::size_t outputs() const override { return widths_.back(); }  // each class's probability
  void predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const override;

  // Units per layer: inputs, hidden widths, classes.
  const std::vector<std::size_t>& widths() const noexcept { return widths_; }
  const ModelOptions& options() const noexcept { return options_; }

 private:
  // Activations of one batch: act[0] the input rows (batch x widths_[0]), act[l] for
  // l > 0 transposed (widths_[l] x batch); act16[l]: act[l] rounded to bf16 (bf16
  // products through oneDNN).
  struct Activations {
    std::vector<std::vector<float>> act;
    std::vector<std::vector<std::uint16_t>> act16;
    std::size_t batch = 0;
  };
  std::size_t layers() const noexcept { return widths_.size() - 1; }
  float* weights(const ParamSet& p, std::size_t l) const { return p.data(tensor_of(l)); }
  float* bias(const ParamSet& p, std::size_t l) const {
    return options_.bias ? p.data(tensor_of(l) + 1) : nullptr;
  }
  std::size_t tensor_of(std::size_t l) const noexcept { return options_.bias ? 2 * l : l; }

  // Fills a.act[0] with row_at(0..count) (count x units).
  template <class RowAt>
  void load_inputs(RowAt row_at, std::size_t count, Activations& a) const;
  // Layer l's input H_l (units x batch), or H_l^T, as strides over its storage: the
  // input rows are stored batch x units, the hidden activations units x batch.
  struct Strides {
    std::ptrdiff_t rs, cs;
  };
  Strides input(std::size_t l, std::size_t batch, bool transposed) const;
  // a.act[1..L] from a.act[0]: W·h + b, ReLU on hidden layers; the top holds logits.
  // W: private weights (oneDNN reads them with loads of its own). With w16, the
  // weights rounded to bf16, the products take bf16 operands, each layer's input
  // rounded into a.act16.
  void forward(const std::vector<const float*>& W, const std::vector<const float*>& bias,
               Activations& a, const std::vector<const std::uint16_t*>* w16 = nullptr) const;
  // step() with the products on the AMX tile unit (kernels/gemm_bf16.hpp): the same
  // batch, the same loss and the same update rule, each product's operands packed
  // (rounded) first.
  template <class U>
  double step_amx(const Batch& b, const ParamSet& p, float lr);
  // z (widths_[l+1] x batch) += bias, then ReLU unless l is the top layer.
  void activate(std::size_t l, float* z, std::size_t batch, const float* bias) const;
  // The layers' biases for reading; shared: copied first, each float read whole.
  template <class U>
  std::vector<const float*> read_biases(const ParamSet& p, bool shared);
  // The SGD (or AdaGrad) step on layer l's bias from its delta d (units x batch).
  template <class U>
  void descend_bias(const ParamSet& p, std::size_t l, const float* d, std::size_t batch, float lr);
  // The batch's summed loss; top (logits, classes x batch) becomes dloss/dlogits.
  double top_delta(float* top, const Batch& batch) const;
  // In place on the top layer: logits -> probabilities; loss and correctness per column.
  double softmax_columns(float* z, std::size_t batch, const float* targets,
                         const std::uint32_t* rows, std::size_t* correct) const;

  ModelOptions options_;
  std::vector<std::size_t> widths_;
  // Per-worker scratch (the model object is private to each process after fork).
  Activations work_;
  std::vector<std::vector<float>> delta_;  // delta_[l]: widths_[l+1] x batch
  std::vector<std::vector<float>> bias_copy_;
  std::vector<float> scaled_;              // alpha times one layer's delta (descend_block)
  std::vector<float> bias_grad_;
  std::vector<std::vector<float>> w_copy_;  // live weights, copied in whole lanes
  std::vector<float> grad_;                // a live W's product, added in whole lanes
  std::vector<std::vector<std::uint16_t>> w16_;  // bf16: the weights rounded
  std::vector<std::uint16_t> d16_;               // bf16: a layer's delta rounded
  std::vector<std::uint16_t> pack_a_, pack_b_;   // AMX: packed operands
  std::vector<const std::uint8_t*> byte_rows_;   // AMX: the batch's byte rows
};

}  // namespace hogwild
