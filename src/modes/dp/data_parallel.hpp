// The step of --mode dp (PyTorch's DataParallel) in the one training process: a
// mini-batch of B rows is split into `threads` shards of consecutive rows; thread t
// computes its shard's loss and gradient with its own model object into its own
// buffers (GradientCapture), so no thread's outputs are gathered onto another; the
// gradients, each the mean over its shard, are summed weighted by shard size in
// thread order and applied once (in parallel over the coordinates). The result is
// serial mode's step on the same B rows up to the order of the additions, and the
// same floats run after run. The threads are a TBB arena of this process, made when
// the run starts training: after any fork, never inherited by a child.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "hogwild/model.hpp"
#include "modes/ddp/gradient_sync.hpp"

namespace hogwild::detail {

class DataParallel final : public EpochPart {
 public:
  // models: one configured model per thread. sparse: as GradientSync's.
  DataParallel(std::vector<std::unique_ptr<Model>> models, const ParamSet& shared,
               Optimizer optimizer, bool sparse);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  unsigned threads() const noexcept { return static_cast<unsigned>(models_.size()); }
  // One mini-batch's step; returns its summed loss. The step loop's step, in place
  // of the model's.
  double train_batch(StepKind kind, const Batch& b, float lr) override;
  void begin_epoch(std::span<const std::uint32_t> rows, std::size_t) override;
  void end_epoch();

  // Its part of the step loop: the mini-batch's step is its threads'.
  bool takes_steps() const noexcept override { return true; }
  void end_epoch(float, const EpochPlace&, bool) override { end_epoch(); }

 private:
  std::vector<std::unique_ptr<Model>> models_;
  std::vector<std::unique_ptr<FlatGradient>> grads_;  // per thread
  Optimizer optimizer_;
  bool sparse_;
  std::vector<std::vector<std::uint32_t>> touched_;  // per thread: its rows' features (sparse)
  std::vector<float> sum_;            // sparse: the first tensor's summed gradient
  std::vector<std::uint32_t> listed_;  // sparse: the coordinates sum_ holds
  std::vector<double> loss_;           // per thread, this mini-batch's (kept: no allocation per batch)
  std::vector<float> weight_;          // per thread, its shard's share of the batch
  // As many threads as asked, on fewer cores too (TBB caps its workers at the cores
  // unless told: --workers 8 on 2 cores ran 2 threads, said 8 and printed TBB's
  // warning). Declared before the arena, which it must outlive.
  std::unique_ptr<tbb::global_control> parallelism_;
  std::unique_ptr<tbb::task_arena> arena_;
};

}  // namespace hogwild::detail
