#include "modes/ddp/gradient_sync.hpp"

#include <algorithm>

#include "hogwild/gradient.hpp"

namespace hogwild::detail {

FlatGradient::FlatGradient(const ParamSet& shared) : shared_(shared) {
  std::size_t total = 0;
  for (const auto& t : shared.tensors()) {
    offset_.push_back(total);
    total += padded(t.size);
  }
  grad_.assign(total, 0.f);
  std::vector<ParamSet::Tensor> mine = shared.tensors();
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i].grad = grad_.data() + offset_[i];
  params_ = ParamSet(std::move(mine));
}

void FlatGradient::apply(const float* grad, std::size_t begin, std::size_t end,
                         Optimizer optimizer, float lr, float scale) const {
  for (std::size_t i = 0; i < shared_.count(); ++i) {
    const ParamSet::Tensor& t = shared_[i];
    const std::size_t lo = std::max(begin, offset_[i]), hi = std::min(end, offset_[i] + t.size);
    if (lo >= hi) continue;
    const std::size_t at = lo - offset_[i];
    const float* g = grad + lo;
    if (optimizer == Optimizer::adagrad)
      dense_adagrad_shared(t.data + at, t.state + at, scale, g, hi - lo, lr, AdaGrad::eps);
    else
      for (std::size_t k = 0; k < hi - lo; ++k) t.data[at + k] += g[k] * scale;
  }
}

GradientSync::GradientSync(const ParamSet& shared, Communicator& comm, Communicator* across,
                           Optimizer optimizer, unsigned accumulate, std::size_t bucket_bytes,
                           bool sparse)
    : comm_(comm), across_(across),
      workers_(comm.size() * (across ? across->size() : 1)), optimizer_(optimizer),
      accumulate_(std::max(1u, accumulate)),
      bucket_floats_((bucket_bytes ? bucket_bytes : kBucketBytes) / sizeof(float)),
      flat_(shared), shared_(shared), first_size_(shared.count() ? shared.size(0) : 0),
      sparse_(sparse && shared.count() > 0) {}

bool GradientSync::due(const Batch& b) {
  if (sparse_)
    for (std::size_t i = 0; i < b.size; ++i) {
      const RowView x = b.row(i);
      touched_.insert(touched_.end(), x.index, x.index + x.nnz);
    }
  return ++pending_ >= accumulate_;
}

void GradientSync::reduce_dense(std::size_t from, float lr) {
  const std::size_t total = flat_.size();
  for (std::size_t begin = from; begin < total;) {
    const std::size_t floats =
        begin == from ? kFirstBucketBytes / sizeof(float) : bucket_floats_;
    const std::size_t end = std::min(total, begin + floats);
    comm_.reduce_scatter(std::span<float>(flat_.data() + begin, end - begin));
    const Slice own = slice_of(end - begin, comm_.rank(), comm_.size());
    if (across_)  // this node's sums of the slice, summed over the nodes
      across_->all_reduce(std::span<float>(flat_.data() + begin + own.begin, own.size()));
    apply(begin + own.begin, begin + own.end, lr);
    begin = end;
  }
}

// Each worker sends each touched coordinate once (its buffer zeroed as it is
// taken), every worker adds all pairs up in rank order (the floats a reduction
// would give), and applies those of its own slice of the tensor.
void GradientSync::reduce_sparse(float lr) {
  float* g = flat_.data();  // the first tensor's buffer starts the flat one
  const std::size_t n = first_size_;
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
  if (across_) {
    // This node's sums in the slice, once each, gathered over the nodes and added
    // in node order: every node then holds the same sums.
    pairs_.clear();
    for (const IndexValue& p : all)
      if (p.index >= own.begin && p.index < own.end && g[p.index] != 0) {
        pairs_.push_back({p.index, g[p.index]});
        g[p.index] = 0;
      }
    for (const IndexValue& p : all) g[p.index] = 0;
    const std::vector<IndexValue> nodes = across_->all_gather(std::span<const IndexValue>(pairs_));
    for (const IndexValue& p : nodes) g[p.index] += p.value;
    for (const IndexValue& p : nodes)
      if (g[p.index] != 0) {
        apply(p.index, p.index + 1, lr);
        g[p.index] = 0;
      }
    return;
  }
  for (const IndexValue& p : all)
    if (p.index >= own.begin && p.index < own.end && g[p.index] != 0) {
      apply(p.index, p.index + 1, lr);
      g[p.index] = 0;  // an index that comes from several workers applies once
    }
  for (const IndexValue& p : all) g[p.index] = 0;
}

// Node 0's weights and optimiser state, slice by slice, to every node.
void GradientSync::broadcast_weights() {
  if (!across_) return;
  for (const ParamSet::Tensor& t : shared_.tensors()) {
    const Slice own = slice_of(t.size, comm_.rank(), comm_.size());
    for (float* p : {t.data, t.state})
      if (p)
        across_->broadcast(std::as_writable_bytes(std::span<float>(p + own.begin, own.size())), 0);
  }
  comm_.barrier();
}

void GradientSync::step(float lr) {
  pending_ = 0;
  ++steps_;
  const std::size_t dense = sparse_ ? flat_.offset(1) : 0;
  if (sparse_) reduce_sparse(lr);
  reduce_dense(dense, lr);
  std::fill(flat_.data() + dense, flat_.data() + flat_.size(), 0.f);
  comm_.barrier();  // every slice is applied: the next step reads the new weights
}

}  // namespace hogwild::detail
