// Embeds GPU training in a program: the same TrainConfig as on the CPU, with
// Device::cuda. CUDA does not survive fork, so the program starts the fork server
// first thing in main, before anything touches CUDA, and the trainer starts its
// workers from it (WorkerStart::fork_server).
//
//   build/examples/gpu_trainer     # an MLP, hogwild on the GPU, then ddp over NCCL
//
// The data: 4 classes, each a Gaussian blob in 32 dimensions. Without a GPU it says
// why and exits 77 (meson's "skipped").
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "hogwild/dataset.hpp"
#include "hogwild/device.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/rng.hpp"
#include "hogwild/trainer.hpp"

namespace {

hogwild::Dataset blobs(int rows, std::uint64_t seed) {
  constexpr int kDims = 32, kClasses = 4;
  hogwild::Rng rng(seed);
  std::vector<float> labels, values;
  for (int i = 0; i < rows; ++i) {
    const int y = i % kClasses;
    labels.push_back(static_cast<float>(y));
    for (int j = 0; j < kDims; ++j)
      values.push_back(static_cast<float>(rng.normal()) + (j % kClasses == y ? 1.5f : 0.f));
  }
  return hogwild::Dataset::dense(labels, values, kDims, "blobs");
}

double train_on_gpu(hogwild::Mode mode, unsigned workers, const hogwild::Dataset& train,
                    const hogwild::Dataset& test) {
  hogwild::TrainConfig config;
  config.model = "mlp";
  config.model_options.hidden = {64, 32};
  config.mode = mode;
  config.workers = workers;
  config.batch = 32;  // the MLP's products, and under ddp each rank's mini-batch
  config.epochs = 5;
  config.step_size.lr0 = mode == hogwild::Mode::ddp ? 0.2f : 0.05f;
  config.device = hogwild::Device::cuda;
  config.worker_start = hogwild::WorkerStart::fork_server;
  const std::string name(hogwild::to_string(mode));
  const auto result = hogwild::train(config, train, &test, [&](const hogwild::Progress& p) {
    std::printf("%s: epoch %.0f, test accuracy %.4f\n", name.c_str(), p.epoch, p.test.accuracy);
  });
  std::printf("%s with %u worker(s): %.0f samples/s, test accuracy %.4f\n", name.c_str(), workers,
              result.samples_per_second, result.test.accuracy);
  return result.test.accuracy;
}

}  // namespace

int main() {
  hogwild::start_fork_server();  // before anything initialises CUDA
  const hogwild::CudaStatus gpu = hogwild::cuda_status();
  if (!gpu.ok) {
    std::printf("no CUDA device (%s): nothing to train on; skipped\n", gpu.message.c_str());
    return 77;
  }
  std::printf("training on %s\n", gpu.message.c_str());
  try {
    const auto train = blobs(40000, 1), test = blobs(4000, 2);
    const double hogwild = train_on_gpu(hogwild::Mode::hogwild, 2, train, test);
    // ddp: one rank per GPU, the gradients summed by NCCL.
    const double ddp =
        train_on_gpu(hogwild::Mode::ddp, static_cast<unsigned>(std::min(gpu.devices, 2)), train,
                     test);
    return hogwild > 0.9 && ddp > 0.9 ? 0 : 1;
  } catch (const hogwild::Error& e) {
    std::fprintf(stderr, "gpu_trainer: %s\n", e.what());
    return e.exit_code();
  }
}
