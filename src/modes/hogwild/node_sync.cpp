#include "modes/hogwild/node_sync.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace hogwild::detail {

NodeSync::NodeSync(const ParamSet& shared, const ParamSet& base,
                   std::unique_ptr<Communicator> leaders, std::size_t every_examples,
                   double every_seconds, std::size_t limit, std::function<bool()> others_done)
    : shared_(shared), leaders_(std::move(leaders)), others_done_(std::move(others_done)),
      every_seconds_(every_seconds), limit_(limit),
      interval_(every_seconds > 0 ? kFirstInterval : std::max<std::size_t>(every_examples, 1)),
      last_(Clock::now()) {
  for (const auto& t : base.tensors()) base_.emplace_back(t.data, t.data + t.size);
  resume_at();
}

void NodeSync::resume_at(std::size_t position) noexcept {
  position_ = position;
  next_ = next_after(position);
}

bool NodeSync::due(std::size_t examples) noexcept {
  position_ += examples;
  examples_ += examples;
  if (position_ < next_ || next_ > limit_) return false;
  next_ = next_after(position_);  // one sync, however many points passed
  return true;
}

// The nodes' changes are averaged (local SGD's model averaging): summed, the
// changes of nodes that trained the same direction from the same stale base add
// up to a step N times too long, which diverged on the generated problem at
// lr 0.5 with 500 examples between syncs (accuracy 0.30 against serial's 0.82).
// The node's workers keep writing while this runs: every access to the shared
// weights is a relaxed atomic one, as theirs are (update_policy.hpp), and an
// update that lands between the read of the delta and the add is kept (it is in
// weights - base at the next sync).
void NodeSync::sync() {
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < shared_.count(); ++k) {
    const ParamSet::Tensor& t = shared_[k];
    std::vector<float>& base = base_[k];
    delta_.resize(t.size);
    read_.resize(t.size);
    for (std::size_t i = 0; i < t.size; ++i) {
      read_[i] = std::atomic_ref<float>(t.data[i]).load(std::memory_order_relaxed);
      delta_[i] = read_[i] - base[i];
    }
    leaders_->all_reduce(std::span<float>(delta_), Reduce::mean);  // the nodes' mean change
    // The new base, plus whatever this node's workers wrote since the read (nothing
    // when they are done: then every node's weights are the same floats).
    for (std::size_t i = 0; i < t.size; ++i) {
      std::atomic_ref<float> w(t.data[i]);
      base[i] += delta_[i];
      w.store(base[i] + (w.load(std::memory_order_relaxed) - read_[i]), std::memory_order_relaxed);
    }
  }
  // The leaders' examples since the last sync and their rates, summed: what the
  // other nodes trained that this node sees only now (the staleness a sync adds),
  // and, in seconds, the next interval: S seconds at the leaders' mean rate (the
  // same double on every leader, so the same schedule).
  const double elapsed = std::chrono::duration<double>(Clock::now() - last_).count();
  double counts[2] = {static_cast<double>(examples_),
                      elapsed > 0 ? static_cast<double>(examples_) / elapsed : 0.0};
  leaders_->all_reduce(std::span<double>(counts), Reduce::sum);
  others_ += counts[0] - static_cast<double>(examples_);
  if (every_seconds_ > 0) {
    const double rate = counts[1] / leaders_->size();
    interval_ = static_cast<std::size_t>(std::clamp(std::round(every_seconds_ * rate), 1.0, 1e15));
    next_ = next_after(position_);
  }
  examples_ = 0;
  last_ = Clock::now();
  ++syncs_;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void NodeSync::report(WorkerProgress& p) const {
  p.node_syncs.store(syncs_, std::memory_order_relaxed);
  p.node_sync_others.store(static_cast<std::uint64_t>(others_), std::memory_order_relaxed);
  p.node_sync_ns.store(static_cast<std::int64_t>(seconds_ * 1e9), std::memory_order_relaxed);
}

}  // namespace hogwild::detail
