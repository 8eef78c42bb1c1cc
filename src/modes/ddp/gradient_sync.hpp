// The synchronous step of --mode ddp: the model's step captures this worker's
// gradient into a private buffer (GradientCapture, gradient.hpp); every
// `accumulate` mini-batches the buffers are summed over the workers by the
// Communicator, bucket by bucket (the first bucket small, as PyTorch's DDP makes
// it), and each worker applies the mean of its own slice of every bucket to the
// shared weights: the reduce-scatter updates the weights in place, and a barrier
// then makes every worker's next step read the whole new set. The update is the
// same floats whichever worker applies it (the sums are in rank order), so the
// weights are bit for bit those of any other run with the same seed and workers.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "hogwild/batch.hpp"
#include "comm/communicator.hpp"
#include "hogwild/optimizer.hpp"
#include "hogwild/param_set.hpp"
#include "trainer/epoch_part.hpp"

namespace hogwild::detail {

// A set's gradient buffers in one array, each tensor's on cache lines of its own,
// and the set with those buffers (ParamSet::Tensor::grad): what a worker's captured
// step writes. Flat coordinates number the array.
class FlatGradient {
 public:
  explicit FlatGradient(const ParamSet& shared);
  // The floats a tensor of `size` takes in the buffer: whole cache lines.
  static constexpr std::size_t padded(std::size_t size) noexcept { return (size + 15) / 16 * 16; }
  const ParamSet& params() const noexcept { return params_; }
  float* data() noexcept { return grad_.data(); }
  std::size_t size() const noexcept { return grad_.size(); }
  // Tensor i's first flat coordinate (size() for i == the tensor count).
  std::size_t offset(std::size_t i) const noexcept {
    return i < offset_.size() ? offset_[i] : grad_.size();
  }
  // Adds scale * g[begin, end) (flat coordinates, g laid out as this buffer) to the
  // shared weights with the optimiser: SGD's step is in g already (-lr g), AdaGrad
  // takes g as its gradient and lr as its step size.
  void apply(const float* g, std::size_t begin, std::size_t end, Optimizer optimizer, float lr,
             float scale) const;

 private:
  ParamSet shared_, params_;
  std::vector<float> grad_;
  std::vector<std::size_t> offset_;
};

class GradientSync final : public EpochPart {
 public:
  // PyTorch's defaults: the first bucket 1 MiB, the others 25 MiB.
  static constexpr std::size_t kFirstBucketBytes = std::size_t{1} << 20;
  static constexpr std::size_t kBucketBytes = std::size_t{25} << 20;

  // shared: the arena's tensors (weights and optimiser state). bucket_bytes: the
  // size of the buckets after the first (0: the default). sparse: the first tensor
  // is indexed by the sparse rows' features (Model::feature_indexed): its gradient
  // goes as the (index, value) pairs of the features the mini-batches touched,
  // all-gathered, instead of a reduction of every coordinate (2^20 of them for a
  // hashed vocabulary, of which a mini-batch touches hundreds).
  // comm: the workers of this machine (its slices); across: with several machines,
  // this worker's group of the workers of the same local rank on every machine,
  // which add up its slices over the machines (else null).
  GradientSync(const ParamSet& shared, Communicator& comm, Communicator* across,
               Optimizer optimizer, unsigned accumulate, std::size_t bucket_bytes, bool sparse);
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // What the step trains: the shared weights, read only, with this worker's buffers.
  const ParamSet& params() const noexcept { return flat_.params(); }
  // After each mini-batch: notes the features it touched (sparse), and returns
  // true when `accumulate` mini-batches are in the buffers.
  bool due(const Batch& b);
  // Sums the buffers over the workers, applies this worker's slices (with lr, for
  // AdaGrad: SGD's step is in the buffer), zeroes the buffers and waits for every
  // worker's slices. At the end of an epoch with mini-batches pending, too.
  void step(float lr);
  bool pending() const noexcept { return pending_ > 0; }
  // With several machines: the first machine's weights and optimiser state to all
  // (each worker its slices), before the first step.
  void broadcast_weights();
  std::size_t steps() const noexcept { return steps_; }
  // Holds the groups it was made with (ddp's part, owning its worker's groups).
  void keep(std::unique_ptr<Communicator> comm, std::unique_ptr<Communicator> across) {
    owned_comm_ = std::move(comm);
    owned_across_ = std::move(across);
  }

  // Its part of the step loop: the steps fill this worker's buffers, and every
  // `accumulate` mini-batches (and at an epoch's end with some pending) the workers
  // step together.
  const ParamSet* trained() const noexcept override { return &params(); }
  bool after_step(const Batch& b, float lr, const EpochPlace& place) override {
    return !due(b) || place.collective([&] { step(lr); });
  }
  // Every worker has the same count of rows, so all of them get here.
  void end_epoch(float lr, const EpochPlace& place, bool whole) override {
    if (whole && pending()) place.collective([&] { step(lr); });
  }

 private:
  // Applies flat coordinates [begin, end) of the buffer, divided by the workers.
  void apply(std::size_t begin, std::size_t end, float lr) {
    flat_.apply(flat_.data(), begin, end, optimizer_, lr, 1 / static_cast<float>(workers_));
  }
  // The dense reduction of flat coordinates [from, size) and its application.
  void reduce_dense(std::size_t from, float lr);
  // The first tensor's touched coordinates, gathered and applied.
  void reduce_sparse(float lr);
  Communicator& comm_;
  Communicator* across_;
  unsigned workers_;  // on all machines
  Optimizer optimizer_;
  unsigned accumulate_;
  std::size_t bucket_floats_;
  FlatGradient flat_;
  ParamSet shared_;
  std::size_t first_size_;  // the first tensor's coordinates
  bool sparse_;
  std::vector<std::uint32_t> touched_;  // the first tensor's, since the last step (repeats too)
  std::vector<IndexValue> pairs_;
  unsigned pending_ = 0;
  std::size_t steps_ = 0;
  std::unique_ptr<Communicator> owned_comm_, owned_across_;
};

}  // namespace hogwild::detail
