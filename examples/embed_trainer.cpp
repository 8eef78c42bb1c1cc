// Embeds the trainer in a program: builds a dataset in memory, trains logistic
// regression with 4 Hogwild! workers, and reads the learned weights back.
//
//   build/examples/embed_trainer          # prints per-epoch accuracy and the weights
//
// The hidden rule is "label = x0 > x1"; the learned w0 comes out positive, w1 negative.
#include <cstdio>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"

int main() {
  hogwild::Rng rng(1);
  std::vector<float> labels, values;
  for (int i = 0; i < 20000; ++i) {
    const float a = static_cast<float>(rng.uniform()), b = static_cast<float>(rng.uniform());
    values.insert(values.end(), {a, b});
    labels.push_back(a > b ? 1.f : 0.f);
  }
  const auto data = hogwild::Dataset::dense(labels, values, 2, "in-memory");

  hogwild::TrainConfig config;
  config.model = "logistic";
  config.mode = hogwild::Mode::hogwild;
  config.workers = 4;
  config.epochs = 5;
  config.step_size.lr0 = 0.5f;
  const auto result = hogwild::train(config, data, &data, [](const hogwild::Progress& p) {
    std::printf("epoch %.0f: accuracy %.4f\n", p.epoch, p.test.accuracy);
  });

  const auto& w = result.parameters.at("w");
  std::printf("w = [%.3f, %.3f], b = %.3f, %.0f samples/s\n", w[0], w[1],
              result.parameters.at("b")[0], result.samples_per_second);
  return result.test.accuracy > 0.95 && w[0] > 0 && w[1] < 0 ? 0 : 1;
}
