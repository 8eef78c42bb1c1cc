#include "modes/dp/data_parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>

namespace hogwild::detail {

DataParallel::DataParallel(std::vector<std::unique_ptr<Model>> models, const ParamSet& shared,
                           Optimizer optimizer, bool sparse)
    : models_(std::move(models)), optimizer_(optimizer), sparse_(sparse && shared.count() > 0),
      touched_(models_.size()),
      parallelism_(std::make_unique<tbb::global_control>(
          tbb::global_control::max_allowed_parallelism,
          std::max<std::size_t>(models_.size(),
                                tbb::global_control::active_value(
                                    tbb::global_control::max_allowed_parallelism)))),
      arena_(std::make_unique<tbb::task_arena>(static_cast<int>(models_.size()))) {
  for (std::size_t t = 0; t < models_.size(); ++t)
    grads_.push_back(std::make_unique<FlatGradient>(shared));
  if (sparse_) sum_.assign(shared.size(0), 0.f);
}

DataParallel::~DataParallel() = default;

void DataParallel::begin_epoch(std::span<const std::uint32_t> rows, std::size_t) {
  for (auto& m : models_) m->begin_epoch(rows);
}
void DataParallel::end_epoch() {
  for (auto& m : models_) m->end_epoch();
}

double DataParallel::train_batch(StepKind kind, const Batch& b, float lr) {
  const std::size_t threads = std::min<std::size_t>(models_.size(), b.size);
  loss_.assign(threads, 0.0);
  const auto shard = [&](std::size_t t) {
    return Batch{b.data, b.targets, b.rows + b.size * t / threads,
                 b.size * (t + 1) / threads - b.size * t / threads};
  };
  arena_->execute([&] {
    tbb::parallel_for(std::size_t{0}, threads, [&](std::size_t t) {
      const Batch s = shard(t);
      loss_[t] = models_[t]->train_batch(kind, s, grads_[t]->params(), lr);
      if (sparse_) {
        touched_[t].clear();
        for (std::size_t i = 0; i < s.size; ++i) {
          const RowView x = s.row(i);
          touched_[t].insert(touched_[t].end(), x.index, x.index + x.nnz);
        }
      }
    });
  });
  // Thread t's gradient is the mean over its shard: weighted by shard / B, the sum
  // is the mean over the batch.
  weight_.resize(threads);
  for (std::size_t t = 0; t < threads; ++t)
    weight_[t] = static_cast<float>(shard(t).size) / static_cast<float>(b.size);
  const std::size_t dense = sparse_ ? grads_[0]->offset(1) : 0;
  if (sparse_) {  // the features the batch touched, summed in thread order
    listed_.clear();
    for (std::size_t t = 0; t < threads; ++t) {
      float* g = grads_[t]->data();
      for (std::uint32_t j : touched_[t])
        if (j < sum_.size() && g[j] != 0) {
          if (sum_[j] == 0) listed_.push_back(j);
          sum_[j] += weight_[t] * g[j];
          g[j] = 0;
        }
    }
    for (std::uint32_t j : listed_)
      if (sum_[j] != 0) {
        grads_[0]->apply(sum_.data(), j, j + 1, optimizer_, lr, 1.f);
        sum_[j] = 0;
      }
  }
  // The dense coordinates, summed into thread 0's buffer and applied, in parallel.
  arena_->execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(dense, grads_[0]->size(), 1 << 14),
                      [&](const tbb::blocked_range<std::size_t>& r) {
      float* sum = grads_[0]->data();
      for (std::size_t i = r.begin(); i < r.end(); ++i) sum[i] *= weight_[0];
      for (std::size_t t = 1; t < threads; ++t) {
        float* g = grads_[t]->data();
        for (std::size_t i = r.begin(); i < r.end(); ++i) {
          sum[i] += weight_[t] * g[i];
          g[i] = 0;
        }
      }
      grads_[0]->apply(sum, r.begin(), r.end(), optimizer_, lr, 1.f);
      std::fill(sum + r.begin(), sum + r.end(), 0.f);
    });
  });
  double total = 0;
  for (double l : loss_) total += l;
  return total;
}

}  // namespace hogwild::detail
