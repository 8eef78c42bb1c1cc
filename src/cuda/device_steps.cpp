// A worker's steps on the GPU: its rows uploaded once (CSR and targets, in the
// worker's own device memory), the epoch's order uploaded each epoch, and a kernel
// launch per chunk on a stream of its own (src/cuda/kernels.hpp).
#include <cuda_runtime.h>

#include <deque>

#include <fmt/format.h>

#include "cuda/check.hpp"
#include "cuda/device_array.hpp"
#include "cuda/kernels.hpp"
#include "cuda/mlp_primitives.hpp"
#include "hogwild/error.hpp"
#include "hogwild/models/linear.hpp"
#include "hogwild/models/mf.hpp"
#include "hogwild/models/mlp.hpp"
#include "hogwild/models/softmax.hpp"
#include "memory/device_arena.hpp"
#include "modes/mode_def.hpp"
#include "trainer/device_steps.hpp"
#include "trainer/tensor_store.hpp"

namespace hogwild::detail {

namespace {

// What the mode states (check_device_run refused a mode that states none).
DeviceAccess access_of(Mode m) {
  const auto access = device_access(m);
  HOGWILD_ENFORCE(access.has_value(), "--device cuda with a mode that has no device access");
  return *access;
}

class CudaSteps final : public DeviceSteps {
 public:
  CudaSteps(const TrainConfig& cfg, const Model& model, const Dataset& data, const float* targets,
            const ParamSet& arena_params, int* lock, const StoredRows* rows, unsigned rank)
      : ddp_(access_of(cfg.mode) == DeviceAccess::gradient), loss_(1) {
    HOGWILD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // ddp: rank 0 trains the arena's tensors, the others a replica on their own GPU,
    // with their own copy of the rows (the arena is on GPU 0).
    if (ddp_ && rank > 0) {
      params_ = replicate(arena_params);
      rows = nullptr;
    } else {
      params_ = arena_params;
    }
    const ParamSet& params = params_;
    if (ddp_) make_gradient_buffer();
    if (rows) {  // the parent's upload, in the device arena
      chunk_.rows = {rows->offsets, rows->index, rows->value, rows->pixels, data.cols(),
                     rows->target};
    } else {
      offsets_ = DeviceArray<std::uint64_t>(data.offsets().data(), data.offsets().size());
      index_ = DeviceArray<std::uint32_t>(data.indices().data(), data.indices().size());
      value_ = DeviceArray<float>(data.values().data(), data.values().size());
      pixels_ = DeviceArray<std::uint8_t>(data.pixels().data(), data.pixels().size());
      target_ = DeviceArray<float>(targets, data.rows());
      chunk_.rows = {offsets_.get(), index_.get(), value_.get(), pixels_.get(), data.cols(),
                     target_.get()};
    }
    chunk_.access = access_of(cfg.mode);
    chunk_.warps = cfg.device_warps;
    chunk_.adagrad = adagrad_ = cfg.optimizer == Optimizer::adagrad;
    chunk_.lock = lock;
    chunk_.loss_sum = loss_.get();
    chunk_.stream = stream_;
    if (const auto* m = dynamic_cast<const LinearModel*>(&model)) {
      linear_.w = params.data(0);
      linear_.w_state = params[0].state;
      linear_.w_grad = grad_of(0);
      if (params.count() > 1) {
        linear_.b = params.data(1);
        linear_.b_state = params[1].state;
        linear_.b_grad = grad_of(1);
      }
      linear_.loss = static_cast<DeviceLinearLoss>(m->loss());
      linear_.signed_targets = m->signed_targets();
      linear_.l2 = m->options().l2;
    } else if (const auto* f = dynamic_cast<const MfModel*>(&model)) {
      mf_ = MfKernelArgs{};
      mf_->P = params.data(0);
      mf_->Q = params.data(1);
      mf_->half = params[0].dtype == Dtype::f16;
      mf_->P_state = params[0].state;
      mf_->Q_state = params[1].state;
      mf_->P_grad = grad_of(0);
      mf_->Q_grad = grad_of(1);
      if (params.count() > 2) {
        mf_->bu = params.data(2);
        mf_->bi = params.data(3);
        mf_->bu_state = params[2].state;
        mf_->bi_state = params[3].state;
        mf_->bu_grad = grad_of(2);
        mf_->bi_grad = grad_of(3);
      }
      mf_->rank = static_cast<std::uint32_t>(f->rank());
      mf_->mean = f->mean();
      mf_->l2 = f->options().l2;
    } else if (const auto* s = dynamic_cast<const SoftmaxModel*>(&model)) {
      if (s->classes() > kMaxDeviceClasses)
        throw ConfigError(fmt::format("--device cuda trains softmax on at most {} classes, and "
                                      "{} has {}", kMaxDeviceClasses, data.source(), s->classes()));
      softmax_ = SoftmaxKernelArgs{};
      softmax_->W = params.data(0);
      softmax_->W_state = params[0].state;
      softmax_->W_grad = grad_of(0);
      if (params.count() > 1) {
        softmax_->b = params.data(1);
        softmax_->b_state = params[1].state;
        softmax_->b_grad = grad_of(1);
      }
      softmax_->classes = static_cast<std::uint32_t>(s->classes());
      softmax_->stride = s->stride();
      softmax_->l2 = s->options().l2;
    } else if (const auto* n = dynamic_cast<const MlpModel*>(&model)) {
      std::vector<float*> grads;
      for (std::size_t i = 0; i < params.count(); ++i) grads.push_back(grad_of(i));
      // --device-streams K: stream 0 is the worker's, the others its own; each
      // stream's mini-batches run beside the others' (Hogwild! workers of their own).
      std::vector<MlpPrimitives*> ops;
      for (unsigned k = 0; k < std::max(1u, cfg.device_streams); ++k) {
        cudaStream_t stream = stream_;
        if (k > 0) {
          HOGWILD_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
          extra_streams_.push_back(stream);
        }
        ops.push_back(&mlp_ops_.emplace_back(stream));
      }
      if (!extra_streams_.empty())
        HOGWILD_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      mlp_batch_ = std::max<std::size_t>(cfg.batch, 1);
      mlp_.emplace(*n, params, grads, chunk_.access, adagrad_, mlp_batch_, ops);
    } else {
      throw ConfigError("--device cuda has no kernel for model " + model.name());
    }
  }
  ~CudaSteps() override {
    mlp_.reset();
    mlp_ops_.clear();  // their cuBLAS handles are on the streams
    for (cudaStream_t s : extra_streams_) cudaStreamDestroy(s);
    if (ready_) cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  std::size_t chunk() const noexcept override {
    // The MLP: 64 mini-batches (as the CPU's loop publishes its place).
    if (mlp_) return 64 * mlp_batch_;
    // Serial: one warp; a chunk is then what it does in about a millisecond.
    return chunk_.access == DeviceAccess::serial ? 4096 : 1 << 16;
  }
  void begin_epoch(std::span<const std::uint32_t> rows) override {
    if (order_.size() < rows.size()) order_ = DeviceArray<std::uint32_t>(rows.size());
    HOGWILD_CUDA(cudaMemcpyAsync(order_.get(), rows.data(), rows.size_bytes(),
                                 cudaMemcpyHostToDevice, stream_));
    chunk_.order = order_.get();
  }
  double train(std::size_t begin, std::size_t count, float lr) override {
    return launch(begin, count, lr);
  }
  double gradient(std::size_t begin, std::size_t count, float) override {
    HOGWILD_ENFORCE(ddp_, "the gradient path is --mode ddp's");
    examples_ += count;
    ++batches_;
    return launch(begin, count, 0);
  }
  std::span<float> gradient_buffer() override { return {grad_.get(), grad_.size()}; }
  void apply(float lr, float scale) override {
    HOGWILD_ENFORCE(ddp_, "the gradient path is --mode ddp's");
    if (examples_ == 0) return;
    // The sum of the mini-batches' means (as the CPU's --accumulate sums them).
    const float per_example =
        scale * static_cast<float>(batches_) / static_cast<float>(examples_);
    for (std::size_t i = 0; i < params_.count(); ++i)
      launch_apply({params_.data(i), params_[i].dtype == Dtype::f16,
                    adagrad_ ? params_[i].state : nullptr, grad_of(i), params_.size(i), lr,
                    per_example, stream_});
    HOGWILD_CUDA(cudaGetLastError());
    HOGWILD_CUDA(cudaStreamSynchronize(stream_));
    examples_ = batches_ = 0;
  }
  std::vector<std::span<std::byte>> weights() override { return weight_spans(params_); }

 private:
  // A kernel launch over positions [begin, begin + count) of the order; the chunk's
  // summed loss once it is done.
  double launch(std::size_t begin, std::size_t count, float lr) {
    HOGWILD_CUDA(cudaMemsetAsync(loss_.get(), 0, sizeof(double), stream_));
    chunk_.begin = begin;
    chunk_.count = count;
    chunk_.lr = lr;
    if (mlp_) {
      // The other streams start after the worker's stream's work so far (the
      // epoch's order, the zeroed loss), and the loss is read after all of them.
      if (ready_) {
        HOGWILD_CUDA(cudaEventRecord(ready_, stream_));
        for (cudaStream_t s : extra_streams_) HOGWILD_CUDA(cudaStreamWaitEvent(s, ready_, 0));
      }
      mlp_->run(chunk_);
      for (cudaStream_t s : extra_streams_) HOGWILD_CUDA(cudaStreamSynchronize(s));
    } else if (mf_) {
      mf_->chunk = chunk_;
      launch_mf(*mf_);
    } else if (softmax_) {
      softmax_->chunk = chunk_;
      launch_softmax(*softmax_);
    } else {
      linear_.chunk = chunk_;
      launch_linear(linear_);
    }
    HOGWILD_CUDA(cudaGetLastError());
    double loss = 0;
    HOGWILD_CUDA(cudaMemcpyAsync(&loss, loss_.get(), sizeof loss, cudaMemcpyDeviceToHost, stream_));
    HOGWILD_CUDA(cudaStreamSynchronize(stream_));
    return loss;
  }

  // ddp, ranks above 0: each tensor (and its state) copied into this GPU's memory;
  // its values come from rank 0 before the first step (DeviceSteps::weights).
  ParamSet replicate(const ParamSet& arena) {
    std::vector<ParamSet::Tensor> t;
    for (const auto& a : arena.tensors()) {
      replica_.emplace_back((a.size * element_bytes(a.dtype) + 3) / 4);  // halves: half the floats
      ParamSet::Tensor copy{a.name, replica_.back().get(), a.size};
      if (a.state) {
        replica_.emplace_back(a.size);
        copy.state = replica_.back().get();
      }
      copy.space = MemorySpace::device;
      copy.dtype = a.dtype;
      t.push_back(std::move(copy));
    }
    return ParamSet(std::move(t));
  }
  // ddp: every tensor's gradient in one zeroed buffer, each at a 256-byte boundary.
  void make_gradient_buffer() {
    std::size_t floats = 0;
    for (const auto& t : params_.tensors()) {
      grad_offset_.push_back(floats);
      floats += (t.size + 63) / 64 * 64;
    }
    grad_ = DeviceArray<float>(floats);
    HOGWILD_CUDA(cudaMemset(grad_.get(), 0, floats * sizeof(float)));
  }
  float* grad_of(std::size_t i) const { return ddp_ ? grad_.get() + grad_offset_[i] : nullptr; }

  bool ddp_;
  bool adagrad_ = false;
  ParamSet params_;
  std::vector<DeviceArray<float>> replica_;
  DeviceArray<float> grad_;
  std::vector<std::size_t> grad_offset_;
  std::size_t examples_ = 0, batches_ = 0;  // given to gradient() since the last apply
  DeviceArray<std::uint64_t> offsets_;
  DeviceArray<std::uint32_t> index_;
  DeviceArray<float> value_;
  DeviceArray<std::uint8_t> pixels_;
  DeviceArray<float> target_;
  DeviceArray<double> loss_;
  DeviceArray<std::uint32_t> order_;
  cudaStream_t stream_ = nullptr;
  DeviceChunk chunk_;
  LinearKernelArgs linear_;
  std::optional<MfKernelArgs> mf_;
  std::optional<SoftmaxKernelArgs> softmax_;
  std::deque<CudaMlpPrimitives> mlp_ops_;  // one per stream (a deque: they stay put)
  std::vector<cudaStream_t> extra_streams_;
  cudaEvent_t ready_ = nullptr;
  std::optional<MlpSteps> mlp_;
  std::size_t mlp_batch_ = 0;
};

}  // namespace

std::unique_ptr<DeviceSteps> make_device_steps(const TrainConfig& cfg, const Model& model,
                                               const Dataset& data, const float* targets,
                                               const ParamSet& params, int* lock,
                                               const StoredRows* rows, unsigned rank) {
  const bool ddp = access_of(cfg.mode) == DeviceAccess::gradient;
  cuda_init(ddp ? fmt::format("ddp's rank {}", rank) : "a worker's steps",
            ddp ? static_cast<int>(rank) : 0);
  return std::make_unique<CudaSteps>(cfg, model, data, targets, params, lock, rows, rank);
}

}  // namespace hogwild::detail
