// Hogwild across nodes (--mode hogwild --nodes N --sync-every S): each node's
// workers train its own arena without locks, as on one machine, and worker 0 of
// every node (its leader) exchanges what its node learnt with the other leaders
// every S of its own examples and at the end of each epoch. A sync averages the
// nodes' changes since the last one (delta = weights - base) over a Gloo group of
// the leaders (local SGD's model averaging), replaces this node's change by the
// mean in the shared weights, and moves the base by the mean: the bases stay the
// same on every node, and an update made on this node while the sync ran is in
// the next delta. What it costs (seconds in
// syncs) and the staleness it adds (a node sees the others' updates up to S x
// workers of their examples late) are in the run's summary.
#pragma once

#include <cstddef>
#include <vector>

#include "hogwild/communicator.hpp"
#include "hogwild/param_set.hpp"

namespace hogwild::detail {

class NodeSync {
 public:
  // shared: the node's arena tensors; base: their values before any worker started
  // (the same on every node: initialised from the seed, or a checkpoint's);
  // leaders: the group of node leaders.
  NodeSync(const ParamSet& shared, const ParamSet& base, Communicator& leaders, std::size_t every);
  // After each mini-batch of the leader: true when `every` examples have passed.
  bool due(std::size_t examples) noexcept;
  void sync();
  std::size_t syncs() const noexcept { return syncs_; }
  double seconds() const noexcept { return seconds_; }

 private:
  ParamSet shared_;
  Communicator& leaders_;
  std::size_t every_, since_ = 0;
  std::vector<std::vector<float>> base_;
  std::vector<float> delta_, read_;
  std::size_t syncs_ = 0;
  double seconds_ = 0;
};

}  // namespace hogwild::detail
