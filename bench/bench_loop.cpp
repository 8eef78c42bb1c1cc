// bench_loop: the hardware yardstick. A minimal hand-written serial SGD loop for
// sparse logistic regression straight over the dataset's CSR arrays — no model
// object, no update policy, no options — visiting the rows in a freshly shuffled
// order each epoch exactly as a hogwild_train worker does. --prefetch adds the one
// thing hogwild_train does that the minimal loop does not: asking for the next
// row's first lines while the current one computes. bench/run.sh runs it
// interleaved with `hogwild_train --mode serial` and `--mode hogwild --workers 1`
// on the same file and reports their ratio to it (docs/PERFORMANCE.md).
//
//   build/bench/bench_loop --train spam.train.cache --test spam.test.cache --epochs 5
//
// Prints one JSON object: examples/s, non-zeros/s, test loss and accuracy.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/model_base.hpp"  // hogwild::prefetch
#include "hogwild/rng.hpp"

int main(int argc, char** argv) {
  std::string train_path, test_path;
  unsigned epochs = 5;
  float lr = 0.5f, decay = 0.9f;
  std::uint64_t seed = 1;
  bool relaxed = false, prefetch = false;
  CLI::App app{"Hand-written serial SGD loop (sparse logistic regression): the yardstick"};
  app.add_option("--train", train_path)->required();
  app.add_option("--test", test_path);
  app.add_option("--epochs", epochs)->capture_default_str();
  app.add_option("--lr", lr)->capture_default_str();
  app.add_option("--lr-decay", decay)->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_flag("--relaxed", relaxed,
               "Access the weights through std::atomic_ref<float> relaxed, as hogwild does");
  app.add_flag("--prefetch", prefetch,
               "Prefetch the next row's first index and value lines, as hogwild_train does");
  CLI11_PARSE(app, argc, argv);

  const hogwild::Dataset train = hogwild::load_dataset(train_path);
  const std::uint64_t* off = train.offsets().data();
  const std::uint32_t* idx = train.indices().data();
  const float* val = train.values().data();
  const float* lab = train.labels().data();
  const std::size_t n = train.rows();
  std::vector<float> w(std::max(train.cols(), std::size_t{1}), 0.f);
  float b = 0;
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  hogwild::Rng rng(seed);

  double seconds = 0;
  for (unsigned e = 0; e < epochs; ++e) {
    rng.shuffle(std::span<std::uint32_t>(order));  // not timed, as in the library
    const float eta = lr * std::pow(decay, static_cast<float>(e));
    const auto t0 = std::chrono::steady_clock::now();
    if (relaxed) {  // the same loop, each weight access a relaxed atomic
      constexpr auto rlx = std::memory_order_relaxed;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t r = order[i];
        const std::uint64_t a = off[r], z_end = off[r + 1];
        float z = b;
        for (std::uint64_t k = a; k < z_end; ++k)
          z += std::atomic_ref<float>(w[idx[k]]).load(rlx) * val[k];
        const float g = eta * ((lab[r] > 0 ? 1.f : 0.f) - 1.f / (1.f + std::exp(-z)));
        for (std::uint64_t k = a; k < z_end; ++k) {
          std::atomic_ref<float> wk(w[idx[k]]);
          wk.store(wk.load(rlx) + g * val[k], rlx);
        }
        b += g;
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t r = order[i];
        if (prefetch && i + 1 < n) {  // what prefetch_row does for a sparse row
          const std::uint64_t next = off[order[i + 1]];
          hogwild::prefetch(idx + next);
          hogwild::prefetch(val + next);
        }
        const std::uint64_t a = off[r], z_end = off[r + 1];
        float z = b;
        for (std::uint64_t k = a; k < z_end; ++k) z += w[idx[k]] * val[k];
        const float g = eta * ((lab[r] > 0 ? 1.f : 0.f) - 1.f / (1.f + std::exp(-z)));
        for (std::uint64_t k = a; k < z_end; ++k) w[idx[k]] += g * val[k];
        b += g;
      }
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  nlohmann::json out{{"examples_per_second", static_cast<double>(n) * epochs / seconds},
                     {"nnz_per_second", static_cast<double>(train.nnz()) * epochs / seconds},
                     {"train_seconds", seconds}};
  if (!test_path.empty()) {
    const hogwild::Dataset test = hogwild::load_dataset(test_path);
    double loss = 0;
    std::size_t correct = 0;
    for (std::size_t r = 0; r < test.rows(); ++r) {
      const hogwild::RowView x = test.row(r);
      float z = b;
      for (std::uint32_t k = 0; k < x.nnz; ++k)
        if (x.index[k] < w.size()) z += w[x.index[k]] * x.value[k];
      const bool y = test.label(r) > 0;
      const float sz = y ? z : -z;
      loss += sz > 0 ? std::log1p(std::exp(-sz)) : -sz + std::log1p(std::exp(sz));
      correct += (z > 0) == y;
    }
    out["test_loss"] = loss / static_cast<double>(test.rows());
    out["test_accuracy"] = static_cast<double>(correct) / static_cast<double>(test.rows());
  }
  fmt::print("{}\n", out.dump());
  return 0;
}
