// Train, save, predict: a program trains logistic regression with 4 Hogwild!
// workers, writes the model file (safetensors, as `hogwild_train --save-model`
// does), and a second part loads it (as a serving program would, knowing nothing of
// the training) to predict single rows and evaluate a held-out set.
//
//   build/examples/save_and_predict [MODEL_FILE]   # default: a temporary file
//
// The hidden rule is "label = x0 > x1"; the loaded model must agree with it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/predictor.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"

namespace {

hogwild::Dataset rows(std::size_t n, std::uint64_t seed) {
  hogwild::Rng rng(seed);
  std::vector<float> labels, values;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = static_cast<float>(rng.uniform()), b = static_cast<float>(rng.uniform());
    values.insert(values.end(), {a, b});
    labels.push_back(a > b ? 1.f : 0.f);
  }
  return hogwild::Dataset::dense(labels, values, 2, "in-memory");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1]
                                    : (std::filesystem::temp_directory_path() /
                                       ("save_and_predict." + std::to_string(::getpid())))
                                          .string();
  // Train and save.
  hogwild::TrainConfig config;
  config.model = "logistic";
  config.mode = hogwild::Mode::hogwild;
  config.workers = 4;
  config.epochs = 5;
  config.step_size.lr0 = 0.5f;
  config.save_model = path;
  hogwild::train(config, rows(20000, 1), nullptr);

  // Load and predict: the file says which model, its options and its labels.
  const hogwild::Predictor model = hogwild::load_model(path);
  const std::vector<float> label{0}, x{0.9f, 0.2f};
  const auto one = model.prepare(hogwild::Dataset::dense(label, x, 2, "one row"));
  float probabilities[2];
  const float predicted = model.predict(one.row(0), probabilities);
  std::printf("x = (0.9, 0.2): label %g, P(1) = %.3f\n", predicted, probabilities[1]);
  const auto m = model.evaluate(model.prepare(rows(5000, 2)));
  std::printf("held-out rows: accuracy %.4f, log loss %.4f, AUC %.4f (%zu rows)\n", m.accuracy,
              m.log_loss, m.auc, m.rows);
  if (argc <= 1) std::filesystem::remove(path);
  return predicted == 1 && m.accuracy > 0.95 && m.auc > 0.99 ? 0 : 1;
}
