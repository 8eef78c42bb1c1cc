#include "trainer/gradient_sync.hpp"

#include <algorithm>

#include "hogwild/gradient.hpp"

namespace hogwild::detail {

GradientSync::GradientSync(const ParamSet& shared, Communicator& comm, Optimizer optimizer,
                           unsigned accumulate, std::size_t bucket_bytes, bool sparse)
    : comm_(comm), optimizer_(optimizer), accumulate_(std::max(1u, accumulate)),
      bucket_floats_((bucket_bytes ? bucket_bytes : kBucketBytes) / sizeof(float)),
      shared_(shared), sparse_(sparse && shared.count() > 0) {
  std::size_t total = 0;
  for (const auto& t : shared.tensors()) {
    offset_.push_back(total);
    total += (t.size + 15) / 16 * 16;  // each tensor's buffer on its own cache lines
  }
  grad_.assign(total, 0.f);
  std::vector<ParamSet::Tensor> mine = shared.tensors();
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i].grad = grad_.data() + offset_[i];
  params_ = ParamSet(std::move(mine));
}

void GradientSync::apply(std::size_t begin, std::size_t end, float lr) {
  const float n = static_cast<float>(comm_.size());
  for (std::size_t i = 0; i < shared_.count(); ++i) {
    const ParamSet::Tensor& t = shared_[i];
    const std::size_t lo = std::max(begin, offset_[i]), hi = std::min(end, offset_[i] + t.size);
    if (lo >= hi) continue;
    const std::size_t at = lo - offset_[i];
    const float* g = grad_.data() + lo;
    if (optimizer_ == Optimizer::adagrad) {
      dense_adagrad_shared(t.data + at, t.state + at, 1 / n, g, hi - lo, lr, AdaGrad::eps);
    } else {
      for (std::size_t k = 0; k < hi - lo; ++k) t.data[at + k] += g[k] / n;  // -lr g, averaged
    }
  }
}

bool GradientSync::due(const Batch& b) {
  if (sparse_)
    for (std::size_t i = 0; i < b.size; ++i) {
      const RowView x = b.row(i);
      touched_.insert(touched_.end(), x.index, x.index + x.nnz);
    }
  return ++pending_ >= accumulate_;
}

void GradientSync::reduce_dense(std::size_t from, float lr) {
  const std::size_t total = grad_.size();
  for (std::size_t begin = from; begin < total;) {
    const std::size_t floats =
        begin == from ? kFirstBucketBytes / sizeof(float) : bucket_floats_;
    const std::size_t end = std::min(total, begin + floats);
    comm_.reduce_scatter(std::span<float>(grad_.data() + begin, end - begin));
    const Slice own = slice_of(end - begin, comm_.rank(), comm_.size());
    apply(begin + own.begin, begin + own.end, lr);
    begin = end;
  }
}

// Each worker sends each touched coordinate once (its buffer zeroed as it is
// taken), every worker adds all pairs up in rank order (the floats a reduction
// would give), and applies those of its own slice of the tensor.
void GradientSync::reduce_sparse(float lr) {
  float* g = grad_.data();  // the first tensor's buffer starts the flat one
  const std::size_t n = shared_[0].size;
  pairs_.clear();
  for (std::uint32_t j : touched_)
    if (j < n && g[j] != 0) {
      pairs_.push_back({j, g[j]});
      g[j] = 0;
    }
  touched_.clear();
  const std::vector<IndexValue> all = comm_.all_gather(std::span<const IndexValue>(pairs_));
  for (const IndexValue& p : all) g[p.index] += p.value;
  const Slice own = slice_of(n, comm_.rank(), comm_.size());
  for (const IndexValue& p : all)
    if (p.index >= own.begin && p.index < own.end && g[p.index] != 0) {
      apply(p.index, p.index + 1, lr);
      g[p.index] = 0;  // an index that comes from several workers applies once
    }
  for (const IndexValue& p : all) g[p.index] = 0;
}

void GradientSync::step(float lr) {
  pending_ = 0;
  ++steps_;
  if (sparse_) {
    reduce_sparse(lr);
    reduce_dense(offset_.size() > 1 ? offset_[1] : grad_.size(), lr);
    std::fill(grad_.begin() + static_cast<std::ptrdiff_t>(offset_.size() > 1 ? offset_[1] : grad_.size()),
              grad_.end(), 0.f);
  } else {
    reduce_dense(0, lr);
    std::fill(grad_.begin(), grad_.end(), 0.f);
  }
  comm_.barrier();  // every slice is applied: the next step reads the new weights
}

}  // namespace hogwild::detail
