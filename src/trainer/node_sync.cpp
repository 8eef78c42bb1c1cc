#include "trainer/node_sync.hpp"

#include <atomic>
#include <chrono>

namespace hogwild::detail {

NodeSync::NodeSync(const ParamSet& shared, const ParamSet& base, Communicator& leaders,
                   std::size_t every)
    : shared_(shared), leaders_(leaders), every_(every ? every : 1) {
  for (const auto& t : base.tensors()) base_.emplace_back(t.data, t.data + t.size);
}

bool NodeSync::due(std::size_t examples) noexcept {
  since_ += examples;
  if (since_ < every_) return false;
  since_ = 0;
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
    leaders_.all_reduce(std::span<float>(delta_), Reduce::mean);  // the nodes' mean change
    // The new base, plus whatever this node's workers wrote since the read (nothing
    // when they are done: then every node's weights are the same floats).
    for (std::size_t i = 0; i < t.size; ++i) {
      std::atomic_ref<float> w(t.data[i]);
      base[i] += delta_[i];
      w.store(base[i] + (w.load(std::memory_order_relaxed) - read_[i]), std::memory_order_relaxed);
    }
  }
  ++syncs_;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace hogwild::detail
