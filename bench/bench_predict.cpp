// bench_predict: hogwild_predict's engine (load_model's Predictor, in parallel over
// the cores) against the trainer's own evaluation of the same rows (Model::evaluate
// on the same weights, what every epoch's test line runs), for a sparse linear model,
// softmax on dense rows and an MLP. Each model is trained for an epoch, saved and
// loaded; then the two are timed in turn, repetitions interleaved, and the ratio of
// each repetition's pair is reported (median and range).
//
//   build/bench/bench_predict [--reps 7] [--scale 1]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hogwild/data_io.hpp"
#include "hogwild/labels.hpp"
#include "hogwild/predictor.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"
#include "slice.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Dense rows of `cols` values in [0, 1] around one of `classes` centres.
hogwild::Dataset blobs(std::size_t rows, std::size_t cols, std::size_t classes, std::uint64_t seed) {
  hogwild::Rng rng(seed);
  std::vector<float> labels, values;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t c = r % classes;
    labels.push_back(static_cast<float>(c));
    for (std::size_t j = 0; j < cols; ++j)
      values.push_back(static_cast<float>(rng.uniform() * 0.5 + (j % classes == c ? 0.5 : 0.0)));
  }
  return hogwild::Dataset::dense(labels, values, cols, "blobs");
}

double seconds(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void bench(const std::string& what, hogwild::TrainConfig cfg, const hogwild::Dataset& train,
           const hogwild::Dataset& test, unsigned reps) {
  const auto file = std::filesystem::temp_directory_path() / fmt::format("bench_predict.{}", ::getpid());
  cfg.save_model = file.string();
  cfg.epochs = 1;
  hogwild::train(cfg, train, nullptr);
  const hogwild::Predictor p = hogwild::load_model(file.string());
  std::filesystem::remove(file);
  const hogwild::Dataset rows = p.prepare(test);
  const std::vector<float> targets = p.description().labels.targets(rows);
  std::vector<float> labels(rows.rows()), out(rows.rows() * p.outputs());
  std::vector<double> trainer, predicted, evaluated, ratio_predict, ratio_evaluate;
  double a0 = 0, a1 = 0;
  const auto n = static_cast<double>(rows.rows());
  for (unsigned r = 0; r < reps; ++r) {
    const double t = seconds([&] { a0 = p.model().evaluate(p.parameters(), rows, targets.data()).accuracy; });
    const double q = seconds([&] { p.predict(rows, labels, out); });
    const double e = seconds([&] { a1 = p.evaluate(rows).accuracy; });
    trainer.push_back(n / t);
    predicted.push_back(n / q);
    evaluated.push_back(n / e);
    ratio_predict.push_back(t / q);
    ratio_evaluate.push_back(t / e);
  }
  for (auto* v : {&trainer, &predicted, &evaluated, &ratio_predict, &ratio_evaluate})
    std::sort(v->begin(), v->end());
  const unsigned m = reps / 2;
  fmt::print("{:<34} {:>7} rows  trainer's evaluation {:>9.0f}/s  predict {:>9.0f}/s ({:.2f}x, "
             "{:.2f}-{:.2f})  evaluate {:>9.0f}/s ({:.2f}x, {:.2f}-{:.2f})  accuracy {:.4f} / {:.4f}\n",
             what, rows.rows(), trainer[m], predicted[m], ratio_predict[m], ratio_predict.front(),
             ratio_predict.back(), evaluated[m], ratio_evaluate[m], ratio_evaluate.front(),
             ratio_evaluate.back(), a0, a1);
}

}  // namespace

int main(int argc, char** argv) {
  unsigned reps = 7;
  double scale = 1;
  CLI::App app{"The Predictor against the trainer's evaluation of the same rows"};
  app.add_option("--reps", reps, "Repetitions, interleaved")->capture_default_str();
  app.add_option("--scale", scale, "Multiplies every row count")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto n = [&](std::size_t rows) { return std::max<std::size_t>(100, static_cast<std::size_t>(rows * scale)); };
  fmt::print("{}, {} hardware threads; median of {} interleaved repetitions\n", cpu_name(),
             std::thread::hardware_concurrency(), reps);

  hogwild::GenerateOptions g;
  g.rows = n(100000) + n(200000);
  g.features = 50000;
  g.nnz_per_row = 75;
  const auto all = hogwild::generate_sparse(g);
  hogwild::TrainConfig linear;
  linear.model = "logistic";
  bench("logistic, sparse (75 nnz, 50k feat)", linear, hogwild::bench::slice(all, 0, n(100000), "train"),
        hogwild::bench::slice(all, n(100000), all.rows(), "test"), reps);

  hogwild::TrainConfig softmax;
  softmax.model = "softmax";
  softmax.step_size.lr0 = 0.01f;
  bench("softmax, dense (784 x 10 classes)", softmax, blobs(n(20000), 784, 10, 1),
        blobs(n(50000), 784, 10, 2), reps);

  hogwild::TrainConfig mlp;
  mlp.model = "mlp";
  mlp.batch = 32;
  mlp.step_size.lr0 = 0.05f;
  mlp.model_options.hidden = {256, 128};
  bench("mlp 784-256-128-10, dense", mlp, blobs(n(10000), 784, 10, 3), blobs(n(30000), 784, 10, 4), reps);
  return 0;
}
