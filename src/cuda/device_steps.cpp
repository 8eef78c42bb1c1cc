// A worker's steps on the GPU: its rows uploaded once (CSR and targets, in the
// worker's own device memory), the epoch's order uploaded each epoch, and its
// model's kernel (device/kernel_registry.hpp) launched per chunk on a stream of its
// own.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "cuda/check.hpp"
#include "cuda/device_array.hpp"
#include "cuda/kernels.hpp"
#include "device/kernel_registry.hpp"
#include "hogwild/error.hpp"
#include "memory/device_arena.hpp"
#include "device/device_steps.hpp"
#include "trainer/tensor_store.hpp"

namespace hogwild::detail {

namespace {

class CudaSteps final : public DeviceSteps {
 public:
  CudaSteps(const TrainConfig& cfg, DeviceAccess access, const Model& model, const Dataset& data,
            const float* targets, const ParamSet& arena_params, int* lock,
            const StoredRows* rows, unsigned rank)
      : ddp_(access == DeviceAccess::gradient), loss_(1) {
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
    chunk_.access = access;
    chunk_.warps = cfg.device_warps;
    chunk_.adagrad = adagrad_ = cfg.optimizer == Optimizer::adagrad;
    chunk_.lock = lock;
    chunk_.loss_sum = loss_.get();
    chunk_.stream = stream_;
    std::vector<float*> grads;
    for (std::size_t i = 0; i < params.count(); ++i) grads.push_back(grad_of(i));
    kernel_ = device_kernel_def(model.name())
                  .make({cfg, model, params, grads, chunk_.access, stream_});
  }
  ~CudaSteps() override {
    kernel_.reset();  // before the stream it launches on
    cudaStreamDestroy(stream_);
  }
  CudaSteps(const CudaSteps&) = delete;
  CudaSteps& operator=(const CudaSteps&) = delete;

  std::size_t chunk() const noexcept override { return kernel_->chunk_size(chunk_.access); }
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
    kernel_->launch(chunk_);
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
  std::unique_ptr<DeviceKernel> kernel_;  // the model's (device/kernel_registry.hpp)
};

}  // namespace

std::unique_ptr<DeviceSteps> make_device_steps(const TrainConfig& cfg, DeviceAccess access,
                                               const Model& model, const Dataset& data,
                                               const float* targets, const ParamSet& params,
                                               int* lock, const StoredRows* rows, unsigned rank) {
  const bool ddp = access == DeviceAccess::gradient;
  cuda_init(ddp ? fmt::format("ddp's rank {}", rank) : "a worker's steps",
            ddp ? static_cast<int>(rank) : 0);
  return std::make_unique<CudaSteps>(cfg, access, model, data, targets, params, lock, rows, rank);
}

}  // namespace hogwild::detail
