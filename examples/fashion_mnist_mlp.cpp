// Fashion-MNIST with the MLP (784-256-128-10, ReLU, softmax cross-entropy) trained
// by 2 Hogwild! workers on one shared copy of the weights.
//
//   build/examples/fashion_mnist_mlp [DIR]           # full run: 60k/10k, 12 epochs, ~0.885
//   build/examples/fashion_mnist_mlp --light [DIR]   # 6k/2k rows, 3 epochs (meson test)
//
// DIR defaults to /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist).
// Prints one line per epoch and the final accuracy; exits 77 (skipped) without data.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "hogwild/data_io.hpp"
#include "hogwild/error.hpp"
#include "hogwild/trainer.hpp"

namespace {

// The first n rows of a dense dataset (floats, or bytes as IDX images load), as a
// dataset of its own.
hogwild::Dataset head(const hogwild::Dataset& d, std::size_t n) {
  n = std::min(n, d.rows());
  if (d.layout() == hogwild::Layout::dense_u8)
    return hogwild::Dataset::dense_u8(d.labels().first(n), d.pixels().first(n * d.cols()),
                                      d.cols(), d.source());
  return hogwild::Dataset::dense(d.labels().first(n), d.values().first(n * d.cols()), d.cols(),
                                 d.source());
}

}  // namespace

int main(int argc, char** argv) {
  bool light = false;
  std::string dir = "/usr/share/datasets/fashion-mnist";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--light") == 0) light = true;
    else dir = argv[i];
  }
  const std::string train_path = dir + "/train-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(train_path)) {
    std::printf("skipped: %s not found (apt-get install dataset-fashion-mnist)\n", train_path.c_str());
    return 77;
  }
  try {
    hogwild::Dataset train_set = hogwild::load_dataset(train_path);
    hogwild::Dataset test_set = hogwild::load_dataset(dir + "/t10k-images-idx3-ubyte.gz");
    if (light) {
      train_set = head(train_set, 6000);
      test_set = head(test_set, 2000);
    }
    hogwild::TrainConfig cfg;
    cfg.model = "mlp";
    cfg.model_options.hidden = {256, 128};
    cfg.mode = hogwild::Mode::hogwild;
    cfg.workers = 2;
    cfg.epochs = light ? 3 : 12;
    cfg.batch = 32;
    cfg.step_size.lr0 = 0.1f;
    cfg.step_size.decay = 0.85f;
    const auto r = hogwild::train(cfg, train_set, &test_set, [&](const hogwild::Progress& p) {
      std::printf("epoch %2.0f/%u  %7.0f samples/s  train loss %.4f  test accuracy %.4f\n",
                  p.epoch, cfg.epochs, p.samples_per_second, p.train_loss, p.test.accuracy);
    });
    std::printf("final test accuracy %.4f with 2 hogwild workers (%.1f s)\n", r.test.accuracy,
                r.train_seconds);
    // The light run lands between 0.81 and 0.84 (16 runs, 3 epochs; with 2 epochs
    // and the whole-set shuffled partition it landed at 0.71-0.76, and an ASan run
    // at 0.69), chance is 0.10: 0.70 tells learning from not learning.
    return r.test.accuracy > (light ? 0.70 : 0.88) ? 0 : 1;
  } catch (const hogwild::Error& e) {
    std::fprintf(stderr, "fashion_mnist_mlp: %s\n", e.what());
    return e.exit_code();
  }
}
