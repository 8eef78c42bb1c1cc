// Predicting with a trained model: load_model reads a model file (--save-model,
// model_file.hpp), builds the model it names through the registry (a user's
// registered model too, whose own predict_rows is used) and holds its weights.
//
//   auto p = hogwild::load_model("spam.safetensors");
//   auto data = p.prepare(hogwild::load_dataset("test.svm"));
//   float label = p.predict(data.row(0));      // as the training data wrote labels
//   hogwild::PredictionMetrics m = p.evaluate(data);  // accuracy, log loss, AUC / RMSE
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/model.hpp"
#include "hogwild/model_file.hpp"

namespace hogwild {

// How well a model predicts labelled rows. NaN where it does not apply: accuracy,
// log loss and AUC for classifiers (log loss where the model gives probabilities,
// AUC for binary models), RMSE and MAE for regressions.
struct PredictionMetrics {
  std::size_t rows = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double log_loss = std::numeric_limits<double>::quiet_NaN();
  double auc = std::numeric_limits<double>::quiet_NaN();
  double rmse = std::numeric_limits<double>::quiet_NaN();
  double mae = std::numeric_limits<double>::quiet_NaN();
};

class Predictor {
 public:
  // A configured model and its weights, one vector per Model::parameters() tensor.
  Predictor(ModelDescription description, std::unique_ptr<Model> model,
            const std::vector<std::vector<float>>& weights);
  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;
  ~Predictor();

  const ModelDescription& description() const noexcept { return d_; }
  const Model& model() const noexcept { return *model_; }
  const ParamSet& parameters() const noexcept { return params_; }
  // Values a row's prediction has (Model::outputs), and what they are:
  // "probabilities" (one per class, in label_of order), "score" or "value".
  std::size_t outputs() const noexcept { return d_.outputs; }
  bool probabilities() const noexcept { return output_ == Output::probabilities; }

  // `data` as the model reads it: the layout it was trained on (dense rows of its
  // features, or sparse ones), a sparse feature it never saw dropped. ConfigError
  // for rows it cannot read (ratings for a classifier, or the other way round).
  Dataset prepare(const Dataset& data) const;
  // One row of a prepared set: its predicted label (a classifier's, as the training
  // data wrote labels) or value; `out`, when not empty, gets outputs() values.
  float predict(RowView row, std::span<float> out = {}) const;
  // Every row of a prepared set, in parallel over the cores: labels[r] and, when
  // `outputs` is not empty, outputs[r * outputs() + k].
  void predict(const Dataset& data, std::span<float> labels, std::span<float> outputs = {}) const;
  // The predictions against the set's labels (DataError for a label the training
  // data did not have, naming the row).
  PredictionMetrics evaluate(const Dataset& data) const;
  // The label of a row whose outputs are `out`.
  float label_of(std::span<const float> out) const noexcept;

 private:
  enum class Output : std::uint8_t { probabilities, score, value };
  // f(first row, rows, their outputs) for every block of kBlock rows, in parallel.
  void for_blocks(const Dataset& data,
                  const std::function<void(std::size_t, std::size_t, const float*)>& f) const;
  ModelDescription d_;
  Output output_ = Output::value;  // d_.output's
  std::unique_ptr<Model> model_;
  struct Free {
    void operator()(float* p) const noexcept;
  };
  std::vector<std::unique_ptr<float[], Free>> owned_;  // the weights, 64-byte aligned
  ParamSet params_;
};

// Reads `path` (DataError for a file that is not a hogwild model file or is
// truncated; ConfigError for a model this program does not have, or weights whose
// names or shapes are not that model's).
Predictor load_model(const std::string& path);

}  // namespace hogwild
