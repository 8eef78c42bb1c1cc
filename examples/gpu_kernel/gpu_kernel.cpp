// A model of your own on the GPU: least squares on sparse rows ("ridge", without
// the penalty), its CPU step written with ModelBase and its GPU kernel in
// ridge_kernel.cu, registered under the model's name (hogwild/device_kernel.hpp).
// The trainer then runs it with --device cuda as it runs the built-in models: the
// weights in device memory shared by the worker processes, each launching the
// kernel on its chunks with the mode's access.
//
//   build/examples/gpu_kernel     # the CPU's hogwild, then the GPU's hogwild and atomic
//
// Exits 0 when the GPU's test loss is within 5 % of the CPU's, 1 otherwise, and 77
// (meson's "skipped") without a GPU.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "hogwild/data_io.hpp"
#include "hogwild/device.hpp"
#include "hogwild/device_kernel.hpp"
#include "hogwild/error.hpp"
#include "hogwild/fork_server.hpp"
#include "hogwild/model_base.hpp"
#include "hogwild/model_registry.hpp"
#include "hogwild/trainer.hpp"
#include "ridge_kernel.hpp"

namespace {

// Least squares: loss (w.x - y)^2 / 2, one weight a feature.
class Ridge : public hogwild::ModelBase<Ridge> {
 public:
  std::string name() const override { return "ridge"; }
  hogwild::LabelKind label_kind() const override { return hogwild::LabelKind::real; }
  void configure(const hogwild::Problem& p) override { features_ = p.features; }
  std::vector<hogwild::TensorSpec> parameters() const override {
    return {{"w", features_, {}}};
  }
  template <class U>
  double step(const hogwild::Batch& b, const hogwild::ParamSet& p, float lr) {
    double loss = 0;
    for (std::size_t i = 0; i < b.size; ++i) {
      const float r = hogwild::row_dot<U>(p.data(0), b.row(i)) - b.target(i);
      loss += 0.5 * r * r;
      hogwild::row_descend<U>(p[0], 0, r / static_cast<float>(b.size), 0, b.row(i), lr);
    }
    return loss;
  }
  void predict(const hogwild::ParamSet& p, hogwild::RowView x, float y, double& loss,
               bool& ok) const {
    const float r = hogwild::row_dot<hogwild::SerialUpdate>(p.data(0), x) - y;
    loss = 0.5 * r * r;
    ok = false;
  }
  bool reports_accuracy() const { return false; }

 private:
  std::size_t features_ = 0;
};

// The GPU's side: the weights' device address, and a launch per chunk.
class RidgeKernel final : public hogwild::DeviceKernel {
 public:
  explicit RidgeKernel(float* w) : w_(w) {}
  void launch(const hogwild::DeviceChunk& c) override { launch_ridge(c, w_); }

 private:
  float* w_;
};

void register_ridge() {
  hogwild::register_model("ridge", [](const hogwild::ModelOptions&) {
    return std::make_unique<Ridge>();
  });
  hogwild::register_device_kernel(
      "ridge",
      {.check =
           [](const hogwild::TrainConfig& cfg, const hogwild::Model&, hogwild::DeviceAccess a) {
             if (a != hogwild::DeviceAccess::serial && a != hogwild::DeviceAccess::hogwild &&
                 a != hogwild::DeviceAccess::atomic)
               throw hogwild::ConfigError("ridge's kernel trains --mode serial, hogwild and "
                                          "atomic");
             if (cfg.batch != 1 || cfg.optimizer != hogwild::Optimizer::sgd)
               throw hogwild::ConfigError("ridge's kernel takes plain SGD, one row a step");
           },
       .make = [](const hogwild::DeviceKernelSetup& s) -> std::unique_ptr<hogwild::DeviceKernel> {
         return std::make_unique<RidgeKernel>(s.params.data(0));
       }});
}

// Rows [begin, end) of a sparse set.
hogwild::Dataset rows(const hogwild::Dataset& d, std::size_t begin, std::size_t end) {
  const auto off = d.offsets();
  std::vector<std::uint64_t> rebased(off.begin() + static_cast<std::ptrdiff_t>(begin),
                                     off.begin() + static_cast<std::ptrdiff_t>(end) + 1);
  for (auto& o : rebased) o -= off[begin];
  const std::size_t first = off[begin], n = off[end] - off[begin];
  return hogwild::Dataset::sparse(d.labels().subspan(begin, end - begin), rebased,
                                  d.indices().subspan(first, n), d.values().subspan(first, n),
                                  d.cols(), "generated");
}

double train(hogwild::Device device, hogwild::Mode mode, const hogwild::Dataset& train_set,
             const hogwild::Dataset& test_set) {
  hogwild::TrainConfig config;
  config.model = "ridge";
  config.mode = mode;
  config.workers = 2;
  config.epochs = 5;
  config.step_size.lr0 = 0.02f;
  config.device = device;
  config.worker_start = hogwild::WorkerStart::fork_server;
  Ridge model;
  const auto r = hogwild::train(config, model, train_set, &test_set);
  const std::string mode_name(hogwild::to_string(mode));
  std::printf("%s %s: %.0f samples/s, test loss %.5f\n", hogwild::to_string(device),
              mode_name.c_str(), r.samples_per_second, r.test.loss);
  return r.test.loss;
}

}  // namespace

int main() {
  register_ridge();               // before the fork server: its workers make the model by name
  hogwild::start_fork_server();   // before anything initialises CUDA
  try {
    hogwild::GenerateOptions g;
    g.rows = 60000;
    g.features = 5000;
    g.nnz_per_row = 30;
    const hogwild::Dataset all = hogwild::generate_sparse(g);
    const hogwild::Dataset train_set = rows(all, 0, 50000), test_set = rows(all, 50000, 60000);
    const double cpu = train(hogwild::Device::cpu, hogwild::Mode::hogwild, train_set, test_set);
    const hogwild::CudaStatus gpu = hogwild::cuda_status();
    if (!gpu.ok) {
      std::printf("no CUDA device (%s): the GPU's runs skipped\n", gpu.message.c_str());
      return 77;
    }
    std::printf("training on %s\n", gpu.message.c_str());
    bool ok = true;
    for (hogwild::Mode mode : {hogwild::Mode::hogwild, hogwild::Mode::atomic})
      ok = train(hogwild::Device::cuda, mode, train_set, test_set) < cpu * 1.05 + 1e-4 && ok;
    return ok ? 0 : 1;
  } catch (const hogwild::Error& e) {
    std::fprintf(stderr, "gpu_kernel: %s\n", e.what());
    return e.exit_code();
  }
}
