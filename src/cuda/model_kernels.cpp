// The built-in models' kernels as DeviceKernels (hogwild/device_kernel.hpp): each
// turns its model's tensors into its kernel's arguments once, and launches a chunk
// (cuda/kernels.hpp). Registered by model name in device/builtin_kernels.cpp.
#include <cuda_runtime.h>

#include <deque>

#include <fmt/format.h>

#include "cuda/check.hpp"
#include "cuda/kernels.hpp"
#include "cuda/mlp_primitives.hpp"
#include "device/kernel_registry.hpp"
#include "device/mlp_steps.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/mf.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/models/softmax.hpp"
#include "hogwild/param_set.hpp"
#include "hogwild/trainer.hpp"

namespace hogwild::detail {

namespace {

// Tensor i's gradient buffer (gradient access), else null.
float* grad(const DeviceKernelSetup& s, std::size_t i) {
  return i < s.grads.size() ? s.grads[i] : nullptr;
}

// A kernel whose launch is one call with arguments fixed when it is made: the
// chunk's added, then Launch.
template <class Args, void (*Launch)(const Args&)>
class ArgsKernel final : public DeviceKernel {
 public:
  explicit ArgsKernel(const Args& a) : a_(a) {}
  void launch(const DeviceChunk& c) override {
    a_.chunk = c;
    Launch(a_);
  }

 private:
  Args a_;
};

LinearKernelArgs linear_args(const DeviceKernelSetup& s) {
  const auto& m = model_as<LinearModel>(s.model);
  LinearKernelArgs a;
  a.w = s.params.data(0);
  a.w_state = s.params[0].state;
  a.w_grad = grad(s, 0);
  if (s.params.count() > 1) {
    a.b = s.params.data(1);
    a.b_state = s.params[1].state;
    a.b_grad = grad(s, 1);
  }
  a.loss = static_cast<DeviceLinearLoss>(m.loss());
  a.signed_targets = m.signed_targets();
  a.l2 = m.options().l2;
  return a;
}

MfKernelArgs mf_args(const DeviceKernelSetup& s) {
  const auto& f = model_as<MfModel>(s.model);
  const ParamSet& p = s.params;
  MfKernelArgs a;
  a.P = p.data(0);
  a.Q = p.data(1);
  a.half = p[0].dtype == Dtype::f16;
  a.P_state = p[0].state;
  a.Q_state = p[1].state;
  a.P_grad = grad(s, 0);
  a.Q_grad = grad(s, 1);
  if (p.count() > 2) {
    a.bu = p.data(2);
    a.bi = p.data(3);
    a.bu_state = p[2].state;
    a.bi_state = p[3].state;
    a.bu_grad = grad(s, 2);
    a.bi_grad = grad(s, 3);
  }
  a.rank = static_cast<std::uint32_t>(f.rank());
  a.mean = f.mean();
  a.l2 = f.options().l2;
  return a;
}

SoftmaxKernelArgs softmax_args(const DeviceKernelSetup& s) {
  const auto& m = model_as<SoftmaxModel>(s.model);
  if (m.classes() > kMaxDeviceClasses)
    throw ConfigError(fmt::format("--device cuda trains softmax on at most {} classes, and "
                                  "the data has {}", kMaxDeviceClasses, m.classes()));
  SoftmaxKernelArgs a;
  a.W = s.params.data(0);
  a.W_state = s.params[0].state;
  a.W_grad = grad(s, 0);
  if (s.params.count() > 1) {
    a.b = s.params.data(1);
    a.b_state = s.params[1].state;
    a.b_grad = grad(s, 1);
  }
  a.classes = static_cast<std::uint32_t>(m.classes());
  a.stride = m.stride();
  a.l2 = m.options().l2;
  return a;
}

// The MLP: mini-batches of --batch rows, each a sequence of launches and cuBLAS
// products (device/mlp_steps.hpp). --device-streams K: stream 0 is the worker's,
// the others the kernel's own; each stream's mini-batches run beside the others'
// (Hogwild! workers of their own).
class MlpKernel final : public DeviceKernel {
 public:
  explicit MlpKernel(const DeviceKernelSetup& s)
      : batch_(std::max<std::size_t>(s.config.batch, 1)) {
    const auto& n = model_as<MlpModel>(s.model);
    std::vector<float*> grads;
    for (std::size_t i = 0; i < s.params.count(); ++i) grads.push_back(grad(s, i));
    std::vector<MlpPrimitives*> ops;
    auto* worker = static_cast<cudaStream_t>(s.stream);
    for (unsigned k = 0; k < std::max(1u, s.config.device_streams); ++k) {
      cudaStream_t stream = worker;
      if (k > 0) {
        HOGWILD_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        extra_streams_.push_back(stream);
      }
      ops.push_back(&ops_.emplace_back(stream));
    }
    if (!extra_streams_.empty())
      HOGWILD_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    steps_.emplace(n, s.params, grads, s.access, s.config.optimizer == Optimizer::adagrad,
                   batch_, ops);
  }
  ~MlpKernel() override {
    steps_.reset();
    ops_.clear();  // their cuBLAS handles are on the streams
    for (cudaStream_t s : extra_streams_) cudaStreamDestroy(s);
    if (ready_) cudaEventDestroy(ready_);
  }
  MlpKernel(const MlpKernel&) = delete;
  MlpKernel& operator=(const MlpKernel&) = delete;

  // 64 mini-batches (as the CPU's loop publishes its place).
  std::size_t chunk_size(DeviceAccess) const override { return 64 * batch_; }

  void launch(const DeviceChunk& c) override {
    // The other streams start after the worker's stream's work so far (the epoch's
    // order, the zeroed loss), and the worker reads the loss after all of them.
    if (ready_) {
      HOGWILD_CUDA(cudaEventRecord(ready_, static_cast<cudaStream_t>(c.stream)));
      for (cudaStream_t s : extra_streams_) HOGWILD_CUDA(cudaStreamWaitEvent(s, ready_, 0));
    }
    steps_->run(c);
    for (cudaStream_t s : extra_streams_) HOGWILD_CUDA(cudaStreamSynchronize(s));
  }

 private:
  std::size_t batch_;
  std::deque<CudaMlpPrimitives> ops_;  // one per stream (a deque: they stay put)
  std::vector<cudaStream_t> extra_streams_;
  cudaEvent_t ready_ = nullptr;
  std::optional<MlpSteps> steps_;
};

}  // namespace

std::unique_ptr<DeviceKernel> make_linear_kernel(const DeviceKernelSetup& s) {
  return std::make_unique<ArgsKernel<LinearKernelArgs, launch_linear>>(linear_args(s));
}
std::unique_ptr<DeviceKernel> make_mf_kernel(const DeviceKernelSetup& s) {
  return std::make_unique<ArgsKernel<MfKernelArgs, launch_mf>>(mf_args(s));
}
std::unique_ptr<DeviceKernel> make_softmax_kernel(const DeviceKernelSetup& s) {
  return std::make_unique<ArgsKernel<SoftmaxKernelArgs, launch_softmax>>(softmax_args(s));
}
std::unique_ptr<DeviceKernel> make_mlp_kernel(const DeviceKernelSetup& s) {
  return std::make_unique<MlpKernel>(s);
}

}  // namespace hogwild::detail
