// Matrix factorization of a rating matrix, the Hogwild! paper's Netflix / KDD Cup
// experiment. A rating r of user u for item i is predicted as
//   z = mu + b_u + b_i + p_u · q_i
// with mu the mean training rating (fixed, from Problem), biases b (unless --no-bias)
// and rank-k factors P (users x k) and Q (items x k), row-major. Loss (z - r)^2 / 2,
// plus lambda/2 (|p_u|^2 + |q_i|^2) for each rating (biases are not penalised, as in
// the other models). Rows are Layout::ratings: index[0] = user, index[1] = item.
#pragma once

#include "hogwild/model_base.hpp"

namespace hogwild {

class MfModel : public ModelBase<MfModel> {
 public:
  // Throws ConfigError unless 1 <= options.rank <= kMaxRank.
  explicit MfModel(const ModelOptions& options);

  static constexpr std::size_t kMaxRank = 1024;

  std::string name() const override { return "mf"; }
  LabelKind label_kind() const override { return LabelKind::real; }
  void configure(const Problem& problem) override;
  // "P" (users x rank), "Q" (items x rank), normal with sd 0.1, of options.factors
  // (fp16: the GPU's kernel alone steps them); then "bu", "bi" (zeros, fp32).
  std::vector<TensorSpec> parameters() const override;

  template <class U>
  double step(const Batch& b, const ParamSet& p, float lr);
  void predict(const ParamSet& p, RowView x, float target, double& loss, bool& correct) const;
  std::size_t outputs() const override { return 1; }  // the predicted rating
  void predict_rows(const ParamSet& p, std::span<const RowView> rows, float* out) const override;
  // The factor rows (and biases) rating x will read, asked for one rating ahead
  // (the trainer's step loop): 100k users x rank 10 is 4 MB of P, past L2, visited in
  // shuffled order, and under hogwild the lines are often in the other core's
  // cache. Measured (2M ratings, rank 10, 3 interleaved runs): hogwild x2 8.6M ->
  // 11.2M ratings/s, serial unchanged (3.86M vs 3.83M).
  bool prefetches_params() const noexcept override { return true; }
  void prefetch_params(const ParamSet& p, RowView x) const noexcept override {
    const std::size_t u = x.index[0], i = x.index[1];
    if (u >= users_ || i >= items_) return;
    const float* pu = p.data(0) + u * rank_;
    const float* qi = p.data(1) + i * rank_;
    prefetch(pu);
    prefetch(pu + rank_ - 1);
    prefetch(qi);
    prefetch(qi + rank_ - 1);
    if (options_.bias) {
      prefetch(p.data(2) + u);
      prefetch(p.data(3) + i);
    }
  }
  // Each rating's factor rows p_u and q_i, and its biases.
  bool touched(std::size_t tensor, const Batch& b, std::vector<std::uint32_t>& keys) const override;
  bool reports_accuracy() const { return false; }

  std::size_t rank() const noexcept { return rank_; }
  float mean() const noexcept { return mean_; }
  const ModelOptions& options() const noexcept { return options_; }

 private:
  // mean + the biases + p_u . q_i (an unknown id: its part left out).
  float rating(const ParamSet& p, RowView x) const noexcept;
  ModelOptions options_;
  std::size_t users_ = 0, items_ = 0, rank_ = 0;
  float mean_ = 0;
  std::vector<float> read_;  // per batch: p_u and q_i as read, 2k floats a rating
  std::vector<float> err_;   // per batch: z - r
  std::vector<float> grad_;  // one rating's gradient for p_u and q_i
};

}  // namespace hogwild
